"""Context parallelism as torchtitan 0.3.0's own attention runs it, not Transformer Engine's: a torchtitan file is
re-priced without TE's context-parallel refusals (its attention is FlexAttention or PyTorch's varlen), and CP beside
the gpt_oss configs' varlen attention, which torchtitan refuses at start-up, is never planned, written as running, or
audited as running."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

OSS = ["--model", "gpt-oss-120b", "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "32768", "--global-batch",
       "64", "--tp", "1", "--ep", "8", "--zero", "3", "--recompute", "full"]


def _evaluate(*argv: str):
    return CliRunner().invoke(main, ["evaluate", *OSS, *argv, "--json"])


def test_a_torchtitan_file_is_not_refused_for_transformer_engines_cp_rules(tmp_path: Path) -> None:
    """GPT-OSS at cp 2 under --cp-comm-type a2a (Megatron's plan, which TE runs beside the sinks): the torchtitan file
    is re-priced under torchtitan's all-gather, which TE's sinks rule does not govern (a user trial was refused, exit 2,
    told to pass the --cp-comm-type a2a it had passed, and got no file)."""
    result = _evaluate("--cp", "2", "--cp-comm-type", "a2a", "--emit", "torchtitan", "--out", str(tmp_path))
    assert result.exit_code != 2, result.output
    assert "Transformer Engine runs context parallelism" not in result.output
    assert json.loads(result.stdout)["layout"]["cp"] == 2
    assert (tmp_path / "torchtitan.sh").exists()


def test_torchtitan_refuses_cp_beside_gpt_oss_varlen_attention() -> None:
    """torchtitan 0.3.0's gpt_oss configs run varlen attention, and validate_config raises NotImplementedError for CP
    beside it (distributed/full_dtensor.py:44-53): evaluate --framework torchtitan refuses cp 2, naming why."""
    result = _evaluate("--cp", "2", "--framework", "torchtitan")
    assert result.exit_code == 2, result.output
    assert "varlen attention" in result.output and "distributed/full_dtensor.py:44-53" in result.output
    assert _evaluate("--cp", "1", "--framework", "torchtitan").exit_code == 0


def test_plan_framework_torchtitan_plans_gpt_oss_without_cp() -> None:
    """A user trial: gpt-oss-120b at sequence 65,536 on 128 H100 was planned tp1 cp2, which torchtitan refuses."""
    result = CliRunner().invoke(main, ["plan", "--model", "gpt-oss-120b", "--cluster", "dgx-h100", "--gpus", "128",
                                       "--seq-len", "65536", "--global-batch", "64", "--framework", "torchtitan",
                                       "--json"])
    assert result.exit_code == 0, result.output
    plans = json.loads(result.stdout)["plans"]
    assert plans and all(p["layout"]["cp"] == 1 for p in plans)


def test_a_torchtitan_file_of_gpt_oss_with_cp_does_not_start(tmp_path: Path) -> None:
    """Without --framework the plan is Megatron's (TE's a2a runs beside the sinks); its torchtitan file says torchtitan
    refuses it, and promises no step time."""
    result = _evaluate("--cp", "2", "--cp-comm-type", "a2a", "--emit", "torchtitan", "--out", str(tmp_path))
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["files_not_starting"] == ["torchtitan.sh"]
    text = (tmp_path / "torchtitan.sh").read_text()
    assert "# this file does not start" in text and "varlen attention" in text


def test_the_audit_refuses_a_gpt_oss_torchtitan_launch_with_cp(tmp_path: Path) -> None:
    """The audit reads the file's context_parallel_degree 2 and refuses it as torchtitan does at start-up."""
    out = tmp_path / "files"
    _evaluate("--cp", "2", "--cp-comm-type", "a2a", "--emit", "torchtitan", "--out", str(out))
    result = CliRunner().invoke(main, ["audit", "--launch", str(out / "torchtitan.sh"), "--model", "gpt-oss-120b",
                                       "--cluster", "dgx-h100", "--gpus", "64"])
    assert result.exit_code == 2, result.output
    assert "cp 2" in result.output and "varlen attention" in result.output


def test_llama3_keeps_cp_under_torchtitan() -> None:
    """FlexAttention runs context parallelism (apply_cp_to_forward's flex_cp_allgather): llama3 is not refused."""
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16",
                                       "--seq-len", "32768", "--global-batch", "16", "--cp", "2", "--zero", "3",
                                       "--recompute", "full", "--framework", "torchtitan", "--json"])
    assert result.exit_code == 0, result.output


QWEN3_8B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
            "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 128, "vocab_size": 151936, "rope_theta": 1000000, "max_position_embeddings": 40960,
            "tie_word_embeddings": False, "rms_norm_eps": 1e-6, "hidden_act": "silu", "torch_dtype": "bfloat16"}


def _audit_line(tmp_path: Path, config: str, cp: int, module: str = "qwen3", model: str = ""):
    if not model:
        model = str(tmp_path / "config.json")
        Path(model).write_text(json.dumps(QWEN3_8B))
    line = tmp_path / "run.sh"
    line.write_text(f"torchrun --nnodes 1 --nproc_per_node 8 -m torchtitan.train --module {module} --config {config} "
                    f"--parallelism.data_parallel_shard_degree {8 // cp} --parallelism.context_parallel_degree {cp}\n")
    return CliRunner().invoke(main, ["audit", "--launch", str(line), "--model", model, "--cluster", "dgx-h100",
                                     "--gpus", "8"])


def test_the_audit_refuses_cp_beside_a_named_configs_varlen_attention(tmp_path: Path) -> None:
    """A QA trial: --module qwen3 --config sft_qwen3_8b_math, whose model_registry("8B", attn_backend="varlen")
    (models/qwen3/config_registry.py:464) runs varlen attention, at context_parallel_degree 2 was priced as running
    ('cp all_gather', 0.197 s); torchtitan 0.3.0's validate_config raises NotImplementedError at start-up
    (distributed/full_dtensor.py:44-53).  The audit refuses it, naming the key, the config's backend and the fix;
    a config that runs FlexAttention (llama3_8b, the module's default 'flex') keeps its CP."""
    result = _audit_line(tmp_path, "sft_qwen3_8b_math", 2)
    assert result.exit_code == 2, result.output
    for text in ("parallelism.context_parallel_degree 2", "attn_backend='varlen'", "config_registry.py:464",
                 "full_dtensor.py:44-53", "so this job does not start", "context_parallel_degree 1"):
        assert text in result.output, result.output
    assert "Traceback" not in result.output
    assert _audit_line(tmp_path, "sft_qwen3_8b_math", 1).exit_code in (0, 1)
    flex = _audit_line(tmp_path, "llama3_8b", 2, "llama3", "llama3-8b")
    assert flex.exit_code in (0, 1) and "cp2" in flex.output, flex.output


def _balancer_line(tmp_path: Path, balancer: str):
    line = tmp_path / "lb.sh"
    line.write_text("torchrun --nnodes 2 --nproc_per_node 8 -m torchtitan.train --module llama3 --config llama3_8b "
                    "--parallelism.data_parallel_shard_degree 2 --parallelism.context_parallel_degree 8 "
                    f"--parallelism.context_parallel_load_balancer {balancer} --training.seq_len 131072 "
                    "--training.local_batch_size 1\n")
    return CliRunner().invoke(main, ["audit", "--launch", str(line), "--model", "llama3-8b", "--cluster", "dgx-h100",
                                     "--gpus", "16"])


def test_the_audit_says_cp_load_balancing_is_off_and_refuses_a_balancer_torchtitan_lacks(tmp_path: Path) -> None:
    """A QA trial: --parallelism.context_parallel_load_balancer None at cp 8 (contiguous shards: the last rank runs
    15/8 of the balanced causal attention) was priced as balanced with no word of it; 'tail', which torchtitan's
    cp_shard raises ValueError for in the first step, was priced as running."""
    off = _balancer_line(tmp_path, "None")
    assert off.exit_code in (0, 1), off.output
    assert "context_parallel_load_balancer None" in off.output and "1.88x the balanced share" in off.output
    bad = _balancer_line(tmp_path, "tail")
    assert bad.exit_code == 2, bad.output
    assert "context_parallel_load_balancer 'tail'" in bad.output and "headtail" in bad.output
    assert "Traceback" not in bad.output
    fine = _balancer_line(tmp_path, "ptrr")
    assert fine.exit_code in (0, 1) and "balanced share" not in fine.output, fine.output


def _best_cp(tmp_path: Path, flavor: str, *extra: str) -> int:
    toml = tmp_path / f"{flavor}.toml"
    toml.write_text(f'[model]\nname = "llama3"\nflavor = "{flavor}"\n'
                    f'[training]\nlocal_batch_size = 1\nseq_len = 131072\n'
                    f'[parallelism]\ndata_parallel_shard_degree = -1\ncontext_parallel_degree = 1\n{"".join(extra)}'
                    f'[compile]\nenable = false\n')
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(toml), "--model", "llama3-8b",
                                       "--cluster", "dgx-h100", "--gpus", "16", "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)["best"]["layout"]["cp"]


def test_the_audits_best_plan_keeps_cp_1_where_the_files_attention_refuses_it(tmp_path: Path) -> None:
    """A QA trial: a llama3 8B_varlen file at cp 1, seq 131,072, was told its best plan is cp 8, which every
    torchtitan with the flavor refuses at start (v0.2.2 models/llama3/model/args.py:57-65); the best plan keeps cp 1.
    8B_flex dated from 0a2107f9 on (context_parallel_load_balancer), where FlexAttention runs CP, may still take it."""
    assert _best_cp(tmp_path, "8B_varlen") == 1
    assert _best_cp(tmp_path, "8B_flex", 'context_parallel_load_balancer = "headtail"\n') > 1


def test_a_torchtitan_file_for_the_users_config_says_cp_needs_flex_attention(tmp_path: Path) -> None:
    """A QA trial: a Qwen3 8B config.json planned at cp 2 was written with 'ships no config for qwen3_8b; replace
    MODULE/CONFIG with yours', and 0.3.0's own Qwen3 8B configs (sft_qwen3_8b_math, qwen3_8b_first_85_pct_layers_nvfp4)
    run varlen attention, beside which torchtitan refuses CP at start-up: the warning says the config must build
    FlexAttention.  At cp 1 it says nothing of it."""
    model = tmp_path / "config.json"
    model.write_text(json.dumps(QWEN3_8B))

    def run(cp: int):
        return CliRunner().invoke(main, ["evaluate", "--model", str(model), "--cluster", "dgx-h100", "--gpus", "16",
                                         "--seq-len", "32768", "--global-batch", "16", "--cp", str(cp), "--zero", "3",
                                         "--recompute", "full", "--framework", "torchtitan", "--emit", "torchtitan",
                                         "--out", str(tmp_path / f"cp{cp}")])
    two = run(2)
    assert two.exit_code == 0, two.output
    text = (tmp_path / "cp2" / "torchtitan.sh").read_text()
    assert "attn_backend 'flex'" in text and "sft_qwen3_8b_math" in text
    assert "attn_backend 'flex'" not in (run(1), (tmp_path / "cp1" / "torchtitan.sh").read_text())[1]
