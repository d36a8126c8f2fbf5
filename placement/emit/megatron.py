"""Megatron-LM (megatron-core 0.19.2): the argument list and environment of `pretrain_gpt.py`.

Flags and rules from reference/frameworks.md §3 (read from Megatron's own parser): rank order
tp-cp-ep-dp-pp, TP innermost, as placement orders ranks; experts on a second generator
(etp, ep, edp, pp).  Uneven pipelines use --decoder-first/last-pipeline-num-layers, interleaving
--num-virtual-stages-per-pipeline-rank (the layers-per-stage flag is not allowed with uneven stages).
With TP or CP > 1 on Hopper and older, Megatron requires CUDA_DEVICE_MAX_CONNECTIONS=1, except under
Megatron-FSDP, which refuses it (found by running Megatron's validate_args on the emitted arguments).
"""

from __future__ import annotations

from placement.emit.common import EmitContext, header, torchrun_lines, warn_block


def arguments(ctx: EmitContext) -> tuple[list[str], dict[str, str], list[str]]:
    """(arguments, environment, warnings)."""
    lay = ctx.plan.layout
    args = ["--tensor-model-parallel-size", str(lay.tp), "--pipeline-model-parallel-size", str(lay.pp),
            "--context-parallel-size", str(lay.cp), "--num-layers", str(ctx.num_layers),
            "--seq-length", str(ctx.plan.seq_len), "--micro-batch-size", str(lay.micro_batch_size),
            "--global-batch-size", str(ctx.plan.global_batch)]
    warnings = []
    if ctx.moe:
        args += ["--expert-model-parallel-size", str(lay.ep), "--expert-tensor-parallel-size", str(lay.etp)]
    if lay.sequence_parallel:
        args.append("--sequence-parallel")
    if lay.vpp > 1:
        args += ["--num-virtual-stages-per-pipeline-rank", str(lay.vpp)]
    stages = lay.stage_layers
    if lay.pp > 1 and len(set(stages)) > 1:
        first, last = stages[0], stages[-1]
        args += ["--decoder-first-pipeline-num-layers", str(first), "--decoder-last-pipeline-num-layers", str(last)]
        if lay.vpp > 1 and (first % lay.vpp or last % lay.vpp):
            warnings.append(f"Megatron needs the first/last stage layers ({first}/{last}) divisible by the virtual "
                            f"stages ({lay.vpp}); use --pipeline-model-parallel-layout for this split")
    if lay.zero_stage == 1:
        args += ["--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"]
    elif lay.zero_stage in (2, 3):
        args += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy",
                 "optim_grads" if lay.zero_stage == 2 else "optim_grads_params",
                 "--ckpt-format", "fsdp_dtensor"]  # validate_args: Megatron-FSDP checkpoints only this way
        if lay.zero_stage == 3 and lay.dp_shard < lay.dp:
            warnings.append(f"HSDP (shard {lay.dp_shard} of dp {lay.dp}) is not expressed: Megatron-FSDP shards "
                            f"over the whole data-parallel group here")
    if lay.recompute == "full":
        args += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    elif lay.recompute == "selective":
        args += ["--recompute-granularity", "selective"]
    # validate_args: TP or CP > 1 without FSDP needs CUDA_DEVICE_MAX_CONNECTIONS=1 (Hopper and older);
    # Megatron-FSDP refuses exactly that value
    fsdp = lay.zero_stage in (2, 3)
    env = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"} if (lay.tp > 1 or lay.cp > 1) and not fsdp else {}
    return args, env, warnings


def render(ctx: EmitContext) -> tuple[str, list[str]]:
    args, env, warnings = arguments(ctx)
    exports = "".join(f"export {k}={v}\n" for k, v in env.items())
    text = (header(ctx, "Megatron-LM (megatron-core 0.19.2)") + warn_block(warnings)
            + "# add your model, data and optimizer arguments; the ones below set the layout\n" + exports
            + f"PLACEMENT_ARGS=({' '.join(args)})\n")
    return text + torchrun_lines(ctx, 'pretrain_gpt.py "${PLACEMENT_ARGS[@]}"'), warnings
