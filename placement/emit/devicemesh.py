"""PyTorch DeviceMesh: an `init_device_mesh` call whose dims follow the plan's rank order.

The mesh stays arange-ordered (reference/frameworks.md §2: permuting the mesh tensor loses the order
inside groups); the rank -> GPU mapping is applied at launch by the host order.
"""

from __future__ import annotations

from placement.emit.common import EmitContext, Runs, header, recipe_warnings, runs_model, warn_block


def mesh_shape(ctx: EmitContext) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """(pp, dp, cp, tp); under HSDP dp splits into (dp_replicate, dp_shard), shard inner, as placement numbers
    the data-parallel ranks (cost.dp: replica groups of stride tp x cp x dp_shard) and torchtitan names them."""
    lay = ctx.plan.layout
    if lay.zero_stage == 3 and lay.dp_shard < lay.dp:
        return ((lay.pp, lay.dp // lay.dp_shard, lay.dp_shard, lay.cp, lay.tp),
                ("pp", "dp_replicate", "dp_shard", "cp", "tp"))
    return (lay.pp, lay.dp, lay.cp, lay.tp), ("pp", "dp", "cp", "tp")


def fsdp_lines(ctx: EmitContext) -> str:
    """How the plan's ZeRO-3 shards, as comments: over cp x the shard ranks (the priced shard group, cost.step
    dense_shard), replicated over dp_replicate under HSDP (torch's fully_shard takes a 2-D mesh as HSDP)."""
    lay = ctx.plan.layout
    if lay.zero_stage != 3:
        return ""
    hsdp = lay.dp_shard < lay.dp
    shard = "dp_shard" if hsdp else "dp"
    fsdp_dim = f"{shard}_cp" if lay.cp > 1 else shard
    dims = f'"dp_replicate", "{fsdp_dim}"' if hsdp else f'"{fsdp_dim}"'
    what = (f"HSDP, sharded over {lay.cp * lay.dp_shard} ranks ({shard} {lay.dp_shard} x cp {lay.cp}) and "
            f"replicated over dp_replicate {lay.dp // lay.dp_shard}" if hsdp
            else f"FSDP over {lay.cp * lay.dp} ranks (dp {lay.dp} x cp {lay.cp})")
    lines = [f"# ZeRO-3 as priced: {what}"]
    if lay.cp > 1 and not hsdp:
        # the flattened mesh kept, not sliced back out of the root: torch 2.13 warns that slicing a flattened dim
        # from the root mesh will be deprecated (torch/distributed/device_mesh.py, a user trial ran the file)
        lines.append(f'# fsdp_mesh = mesh["{shard}", "cp"]._flatten("{fsdp_dim}")  # as torchtitan flattens it')
        lines.append("# fully_shard(block, mesh=fsdp_mesh) for every block, then the model")
        return "".join(f"{x}\n" for x in lines)
    if lay.cp > 1:
        lines.append(f'# mesh["{shard}", "cp"]._flatten("{fsdp_dim}")  # as torchtitan flattens it; the 2-D HSDP '
                     f'mesh below slices it from the root, which torch 2.13 warns will be deprecated')
    lines.append(f"# fully_shard(block, mesh=mesh[{dims}]) for every block, then the model")
    return "".join(f"{x}\n" for x in lines)


def render(ctx: EmitContext) -> tuple[str, list[str]]:
    shape, names = mesh_shape(ctx)
    lay = ctx.plan.layout
    body = (
        "from torch.distributed.device_mesh import init_device_mesh\n\n"
        f"# world size {ctx.plan.num_gpus}: dims outermost -> innermost, rank stride 1 on the last\n"
        f'mesh = init_device_mesh("cuda", {shape}, mesh_dim_names={names})\n'
    ) + fsdp_lines(ctx)
    if lay.ep > 1:
        stage = lay.tp * lay.cp * lay.dp
        body += (
            f"# experts: within a pipeline stage, ranks split as (edp, ep, etp) = "
            f"({stage // (lay.ep * lay.etp)}, {lay.ep}, {lay.etp}), etp innermost\n"
            f'expert_mesh = init_device_mesh("cuda", ({lay.pp}, {stage // (lay.ep * lay.etp)}, {lay.ep}, {lay.etp}), '
            f'mesh_dim_names=("pp", "edp", "ep", "etp"))\n'
        )
    warnings = recipe_warnings(ctx, "a DeviceMesh", RUNS_INSTEAD)
    line = ""
    runs = Runs()
    fp8 = ctx.plan.precision == "fp8"
    if fp8:  # a mesh sets no precision: price what runs if the code adds no FP8
        runs.set_precision(ctx.plan, "bf16")
    runs_model(ctx, "devicemesh", runs)  # your model code runs the model as given
    if runs.what:
        line, warn = ctx.runs_as(runs)
        if fp8:
            # "this file runs" kept at the start: plan's files_run lists the line (a user trial missed it there)
            line = line.replace("this file runs", "this file runs, without FP8 layers in your code,", 1)
            warnings.insert(0, f"a DeviceMesh sets no precision: the plan's FP8 GEMMs must come from your training "
                               f"code (torchao Float8Linear or Transformer Engine layers); "
                               f"{warn.replace('this file runs', 'without them it runs', 1)}")
        else:
            warnings.insert(0, warn)
    return header(ctx, "PyTorch DeviceMesh", runs=line, order_where="of launch.sbatch and hosts.txt (node rank k on "
                  "its k-th host)") + warn_block(warnings) + body, warnings


_YOURS = "the mesh carries no recipe; your training code runs whatever it implements"
RUNS_INSTEAD = {field: _YOURS for field in ("moe_dispatcher", "cuda_graphs", "tp_comm_overlap", "ep_comm_overlap",
                                            "recompute_modules", "delay_wgrad", "pipeline_layout",
                                            "attention_kernel", "cp_comm_type", "cuda_launch_blocking",
                                            "grad_accumulation", "pipeline_p2p_whole", "pipeline_grads_whole",
                                            "pipeline_p2p_scatter",
                                            "pipeline_p2p_blocking", "pipeline_sends_mask", "fp8_saves_16bit_inputs",
                                            "pp_comm_overlap", "align_param_gather",
                                            "fp8_lm_head", "fp8_recasts_weights", "sp_saves_gathered_inputs",
                                            "tp_gathers_16bit",
                                            "tp_async_backward",
                                            "pipeline_unsharded_grads",
                                            "loss_chunks", "reshard_after_backward", "zero0_as_fsdp",
                                            "optimizer_over_replicas",
                                            "dp_reduce_every_microbatch",
                                            "grad_all_reduce", "grad_reduce_fp32", "grad_buckets",
                                            "ddp_bucket_params", "grad_buffer_passes",
                                            "dispatch_fp8", "dp_overlap", "param_gather_overlap",
                                            "fp8_recipe", "fp8_params",
                                            "activation_func_fp8_input_store", "optimizer_state_bf16", "fp32_weights",
                                            "fp32_weights_autocast",
                                            "optimizer_master_weights",
                                            "recompute_num_layers", "mtp_layers", "account_for_embedding",
                                            "account_for_loss", "pipeline_schedule", "cross_entropy_fusion",
                                            "loss_eager_float32", "moe_einsum_dispatch",
                                            "cpu_affinity", "moe_capacity_factor", "checkpoint_sync",
                                            "checkpoint_interval")}
"""A mesh states degrees only: every recipe feature of the plan is the training code's to implement."""
