"""The command line: a thin click layer.  It builds typed specs from flags, calls the core, and prints.

Exit codes: 0 ok; 1 infeasible (or `evaluate` of a layout over capacity); 2 bad input; 3 internal
error (a bug).  Errors are
one paragraph on stderr, never a traceback.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import signal
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path

import click
from pydantic import ValidationError

from placement import __version__
from placement.catalog import (
    accelerator_file_given,
    accelerator_names,
    cluster_file,
    cluster_names,
    load_accelerator,
    load_cluster,
    load_model,
    model_names,
)
from placement.errors import InputError, PlacementInfeasible
from placement.frameworks import CAPABILITIES, check_precision, check_seq_len, model_as_run, model_recipe, run_config
from placement.loaders.errors import format_validation_error
from placement.specs import Layout, ModelSpec, Precision, Recompute, TrainingSpec
from placement.specs.recipe import Recipe
from placement.specs.training import MAX_GLOBAL_BATCH, MAX_SEQ_LEN
from placement.topology import Topology

EXIT_OK, EXIT_INFEASIBLE, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_INTERRUPTED = 130
"""A command stopped by Ctrl-C or SIGTERM (128 + SIGINT, the shell's convention)."""
INTERRUPTED = (f"interrupted (exit {EXIT_INTERRUPTED}); every file written so far is whole (outputs are written to a "
               f"temporary name and renamed)")
EXIT_CELLS_LOST = 75
"""sysexits EX_TEMPFAIL: sweep workers died; the finished cells are cached and a rerun computes the rest."""
EXIT_FINDINGS = 1
"""`audit`: findings at or above --fail-on exist."""


class _FiniteRange(click.FloatRange):
    """click.FloatRange, refusing nan (every comparison with nan is false, so FloatRange lets it through)."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail(f"{value!r} is not a number.", param, ctx)
        return number


_SECONDS = _FiniteRange(0.01, 600)


EXIT_BROKEN_PIPE = 141
"""A shell's status for a writer stopped by SIGPIPE (128 + 13): `placement plan | head` ends as `cat | head` does."""


def _fail(code: int, message: str) -> None:
    click.echo(f"placement: {message}", err=True)
    sys.exit(code)


def handle_errors(fn: Callable) -> Callable:
    """Map the core's typed errors to exit codes with one-paragraph messages."""

    @wraps(fn)
    def wrapper(*args, **kwargs):
        import threading

        main_thread = threading.current_thread() is threading.main_thread()  # handlers install only there
        previous = signal.signal(signal.SIGTERM, _interrupt) if main_thread else None  # SIGTERM stops like Ctrl-C
        try:
            return fn(*args, **kwargs)
        except InputError as err:
            _fail(EXIT_BAD_INPUT, str(err))
        except ValidationError as err:
            _fail(EXIT_BAD_INPUT, format_validation_error(err, "input"))
        except PlacementInfeasible as err:
            _fail(EXIT_INFEASIBLE, f"infeasible ({err.binding}): {err}")
        except KeyboardInterrupt:  # Ctrl-C (or SIGTERM where a command turns it into one): nothing half-written
            _fail(EXIT_INTERRUPTED, INTERRUPTED)
        except BrokenPipeError:  # the reader went away (`placement plan | head`): no error, as any pipe writer
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # Python's flush of stdout at exit would raise again
            sys.exit(EXIT_BROKEN_PIPE)
        except Exception as err:  # a bug: say so in one paragraph; PLACEMENT_DEBUG=1 shows the traceback
            if _SIGNALLED:  # raised by the stop itself, wherever it landed
                _fail(EXIT_INTERRUPTED, INTERRUPTED)
            if os.environ.get("PLACEMENT_DEBUG"):
                raise
            _fail(EXIT_INTERNAL, f"internal error ({type(err).__name__}: {err}); this is a bug in placement "
                                 f"{__version__}: please report it with the command line "
                                 f"(PLACEMENT_DEBUG=1 prints the traceback)")
        finally:
            if main_thread:
                signal.signal(signal.SIGTERM, previous)

    return wrapper


def job_options(fn: Callable) -> Callable:
    opts = [
        click.option("--model", "model_ref", required=True,
                     help="Catalog name (see `placement show models`), a model YAML, or a HuggingFace config.json."),
        click.option("--cluster", "cluster_ref", default="dgx-h100", show_default=True,
                     help="Catalog name (see `placement show clusters`) or a cluster YAML."),
        click.option("--gpus", type=int, default=None, help="GPU count (default: the cluster's default size)."),
        click.option("--nodes", type=int, default=None, help="Node count, instead of --gpus."),
        click.option("--segment", "segment", type=int, default=None,
                     help="SLURM `sbatch --segment N` of the job (multi-node NVLink domains, GB200 NVL72): its nodes "
                          "come N at a time from one rack; 0 = no segment, racks filled whole (default: the largest "
                          "divisor of the node count up to the cluster's segment_nodes, as Megatron-Bridge's launcher "
                          "passes it; a note says it where it is below segment_nodes). With a block-plugin "
                          "--slurm-topology, checks the allocation against it."),
        click.option("--seq-len", type=int, default=None, help="Tokens per sequence (default: the model's)."),
        click.option("--global-batch", type=int, default=None, help="Sequences per step (default: the model's)."),
        click.option("--precision", type=click.Choice([p.value for p in Precision]), default="bf16",
                     show_default=True, help="GEMM precision."),
        click.option("--memory-headroom-gib", type=float, default=0.0, show_default=True,
                     help="GiB of HBM per GPU to keep free beyond the modelled reserve (fragmentation, NCCL "
                          "buffers, a margin): a layout fits when its peak is at most the capacity less this."),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout."),
        click.option("--slurm-topology", type=click.Path(dir_okay=False), default=None,
                     help="SLURM topology.conf (tree or block plugin) of the real cluster, instead of --cluster."),
        click.option("--nodelist", default=None,
                     help="The job's hosts: a hostlist expression ($SLURM_JOB_NODELIST) or @FILE, one per line."),
        click.option("--node-type", multiple=True,
                     help="Catalog cluster whose node design the hosts have (with --slurm-topology/--cluster-graph);"
                          " repeat as HOSTLIST=NAME for mixed allocations."),
        click.option("--cluster-graph", type=click.Path(dir_okay=False), default=None,
                     help="networkx node-link JSON of any other fabric (with --node-type)."),
        click.option("--oversubscription", type=float, default=None,
                     help="Down:up ratio of the leaf uplinks of a real cluster (default: the node type's tiers)."),
        click.option("--node-topo", type=click.Path(dir_okay=False), default=None,
                     help="`nvidia-smi topo -m` output of one node: prices groups inside a node by their real links."),
        CALIBRATION_OPTION,
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _remember_calibration(ctx: click.Context, _param, value):
    """--calibration is read where the topology is built (build_job), inside the command's error handling."""
    ctx.meta["calibration_path"] = value
    return value


CALIBRATION_OPTION = click.option(
    "--calibration", type=click.Path(dir_okay=False), default=None, expose_value=False,
    callback=_remember_calibration,
    help="Profile written by `placement calibrate`: price with the constants fitted to your cluster.")


def _calibration():
    """(path, profile) of --calibration, or (None, None)."""
    ctx = click.get_current_context(silent=True)
    path = ctx.meta.get("calibration_path") if ctx is not None else None
    if path is None:
        return None, None
    from placement.calibration.profile import load_profile

    if "calibration_profile" not in ctx.meta:
        ctx.meta["calibration_profile"] = load_profile(path)
    return path, ctx.meta["calibration_profile"]


def calibration_json() -> dict | None:
    """What JSON output says about the profile it priced with (None: the catalog's constants)."""
    path, profile = _calibration()
    if profile is None:
        return None
    from placement.calibration.profile import summary

    out = summary(profile, str(path))
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        out["defaults"] = {k: v for k, v in _calibration_defaults(profile).items() if k in out["constants"]}
        if "uncalibrated_step_time_s" in ctx.meta:
            out["uncalibrated_step_time_s"] = ctx.meta["uncalibrated_step_time_s"]
        if ctx.meta.get("calibration_design_warning"):
            out["design_warning"] = ctx.meta["calibration_design_warning"]
    return out


def _calibration_defaults(profile) -> dict[str, float]:
    """Each constant as the job's cluster prices it without the profile (the profile's own defaults when the
    command built no topology)."""
    ctx = click.get_current_context(silent=True)
    topo = ctx.meta.get("uncalibrated_topology") if ctx is not None else None
    if topo is None:
        return {k: c.default for k, c in profile.constants.items()}
    from placement.calibration.profile import defaults

    return defaults(topo)


def _calibration_line() -> str | None:
    """`calibration: PATH (fitted on CLUSTER): constants`, the last line of the text output (None: no profile)."""
    path, profile = _calibration()
    if profile is None:
        return None
    default = _calibration_defaults(profile)
    fitted = ", ".join(f"{k} {default.get(k, profile.constants[k].default):.4g} -> {v:.4g}"
                       for k, v in sorted(profile.fitted().items())) or "none identified"
    edited = profile.edited()
    by_hand = ("; edited after the fit: " + ", ".join(
        f"{k} {'not identified' if v is None else f'fitted {v:.4g}'}, set to {profile.constants[k].value:.4g}"
        for k, v in sorted(edited.items()))) if edited else ""
    line = f"calibration: {path} (fitted on {profile.cluster}{by_hand}): {fitted}"
    from placement.calibration.profile import constant_warnings

    line += "".join(f"\nwarning (from the profile): {w}" for w in constant_warnings(profile))
    line += "".join(f"\nwarning (from the profile): {k} is {v:.4g} in the file but not identified by the fit, so it "
                    f"is priced at its default {default.get(k, profile.constants[k].default):.4g}; to price {v:.4g}, "
                    f"set its `identified: true`" for k, v in sorted(profile.ignored().items()))
    ctx = click.get_current_context(silent=True)
    if ctx is not None and "uncalibrated_step_time_s" in ctx.meta and "calibrated_step_time_s" in ctx.meta:
        line += (f"\nstep {ctx.meta['calibrated_step_time_s']:.3f} s with the profile, "
                 f"{ctx.meta['uncalibrated_step_time_s']:.3f} s without it (the same layout and recipe priced with "
                 f"the catalog's constants)")
    return line


def _design_warnings(profile, clusters) -> None:
    """Warn, once per cluster design, where a calibration profile fitted on another design prices it (its
    efficiencies are shares of the other design's bandwidths); JSON output carries them under
    calibration.design_warning."""
    from placement.calibration.profile import design_differences

    warnings = list(dict.fromkeys(w for w in (design_differences(profile, c) for c in clusters) if w))
    for w in warnings:
        click.echo(f"placement: warning: {w}", err=True)
    ctx = click.get_current_context(silent=True)
    if ctx is not None and warnings:
        ctx.meta["calibration_design_warning"] = " | ".join(warnings)


def _echo_calibration() -> None:
    line = _calibration_line()
    if line is not None:
        click.echo(line)


REPORT_HELP = ("Also write one self-contained HTML page (inline SVG charts, nothing fetched, prints): {what}. "
               "Its folder is created if missing.")


def _check_report(path: str | None) -> Path | None:
    """--report FILE.html, checked before any work: an .html name whose folder can be written."""
    if path is None:
        return None
    from placement.outfiles import check_out_file

    if Path(path).suffix.lower() not in (".html", ".htm"):
        raise InputError(f"--report {path}: the report is an HTML page; give a file name ending in .html (or .htm)")
    return check_out_file(path, "--report")


def _write_report(report: Path | None, page: Callable[[], str]) -> None:
    if report is None:
        return
    from placement.outfiles import write_atomic

    click.echo(f"wrote {write_atomic(report, page())}", err=True)


RECIPE_FLAGS = {
    # Recipe field -> its flag (the flags a user sets often; the rest go in --recipe FILE.yaml)
    "moe_dispatcher": "--moe-dispatcher", "cuda_graphs": "--cuda-graphs",
    "moe_einsum_dispatch": "--moe-einsum-dispatch", "tp_comm_overlap": "--tp-comm-overlap",
    "ep_comm_overlap": "--ep-comm-overlap", "delay_wgrad": "--delay-wgrad", "dispatch_fp8": "--dispatch-fp8",
    "fp8_recipe": "--fp8-recipe", "recompute_modules": "--recompute-modules",
    "recompute_num_layers": "--recompute-num-layers", "mtp_layers": "--mtp-layers",
    "pipeline_layout": "--pipeline-layout", "account_for_embedding": "--account-for-embedding",
    "account_for_loss": "--account-for-loss", "pipeline_schedule": "--pipeline-schedule",
    "routing_imbalance": "--routing-imbalance", "moe_capacity_factor": "--moe-capacity-factor",
    "cross_entropy_fusion": "--cross-entropy-fusion", "loss_eager_float32": "--loss-eager-float32",
    "pipeline_p2p_whole": "--pipeline-p2p-whole", "pipeline_p2p_scatter": "--pipeline-p2p-scatter",
    "pipeline_p2p_blocking": "--pipeline-p2p-blocking", "pp_comm_overlap": "--pp-comm-overlap",
    "pipeline_grads_whole": "--pipeline-grads-whole",
    "pipeline_sends_mask": "--pipeline-sends-mask", "fp8_saves_16bit_inputs": "--fp8-saves-16bit-inputs",
    "sp_saves_gathered_inputs": "--sp-saves-gathered-inputs", "tp_async_backward": "--tp-async-backward",
    "tp_gathers_16bit": "--tp-gathers-16bit",
    "pipeline_unsharded_grads": "--pipeline-unsharded-grads",
    "reshard_after_backward": "--reshard-after-backward",
    "zero0_as_fsdp": "--zero0-as-fsdp", "dp_reduce_every_microbatch": "--dp-reduce-every-microbatch",
    "optimizer_over_replicas": "--optimizer-over-replicas",
    "optimizer_over_replicas_beside_fsdp": "--optimizer-over-replicas-beside-fsdp",
    "optimizer_state_bf16": "--optimizer-state-bf16", "optimizer_master_weights": "--optimizer-master-weights",
    "fp32_weights": "--fp32-weights", "fp32_weights_autocast": "--fp32-weights-autocast",
    "norms_fused": "--norms-fused",
    "remat_saves_named_only": "--remat-saves-named-only", "expert_w1_rerun": "--expert-w1-rerun",
    "fp8_params": "--fp8-params", "activation_func_fp8_input_store": "--activation-fp8-input-store",
    "attention_kernel": "--attention-kernel", "cp_comm_type": "--cp-comm-type",
    "grad_reduce_fp32": "--grad-reduce-fp32", "grad_all_reduce": "--grad-all-reduce", "dp_overlap": "--dp-overlap",
    "param_gather_overlap": "--param-gather-overlap", "align_param_gather": "--align-param-gather",
    "moe_fusions": "--moe-fusions", "cpu_affinity": "--cpu-affinity", "fused_model_ops": "--fused-model-ops",
    "cuda_launch_blocking": "--cuda-launch-blocking", "grad_accumulation": "--grad-accumulation",
    "grad_buckets": "--grad-buckets", "ddp_bucket_params": "--ddp-bucket-params",
    "grad_buffer_passes": "--grad-buffer-passes",
    "checkpoint_sync": "--checkpoint-sync", "checkpoint_interval": "--checkpoint-interval",
    "loss_chunks": "--loss-chunks", "fp8_lm_head": "--fp8-lm-head", "fp8_recasts_weights": "--fp8-recasts-weights",
}
"""Every Recipe field has a flag (a test checks it), so any priced job can be written as one command."""
def recipe_options(fn: Callable) -> Callable:
    """--recipe FILE.yaml and one flag per Recipe field a user sets often; flags win over the file."""
    from placement.specs.recipe import (
        AttentionKernel,
        CpCommType,
        CudaGraphs,
        Dispatcher,
        EinsumDispatch,
        Fp8Recipe,
        GradAccumulation,
        GradBuckets,
        PipelineSchedule,
    )

    def onoff(field: str, what: str):
        flag = RECIPE_FLAGS[field]
        return click.option(f"{flag}/--no-{flag[2:]}", field, default=None, help=what)

    opts = [
        click.option("--recipe", "recipe_file", type=click.Path(dir_okay=False), default=None,
                     help="YAML mapping of recipe fields (placement/specs/recipe.py: moe_dispatcher, cuda_graphs, "
                          "tp_comm_overlap, ..., routing_imbalance); the recipe flags below override it."),
        click.option("--moe-dispatcher", "moe_dispatcher", type=click.Choice([d.value for d in Dispatcher]),
                     default=None, help="MoE token dispatcher (`plan` chooses when not given)."),
        click.option("--moe-einsum-dispatch", "moe_einsum_dispatch",
                     type=click.Choice([g.value for g in EinsumDispatch]), default=None,
                     help="MoE tokens dispatched and combined by one-hot mask GEMMs over each micro-batch "
                          "(DeepSpeed-MoE) or sequence (MaxText's sparse_matmul False): 2 s^2 k f h FLOPs each per "
                          "group of s tokens; default none (a permutation, no GEMM)."),
        click.option("--cuda-graphs", "cuda_graphs", type=click.Choice([g.value for g in CudaGraphs]), default=None,
                     help="CUDA graph scope: none, partial (attention, router, preprocess) or full iteration "
                          "(`plan` chooses when not given)."),
        onoff("tp_comm_overlap", "TP communication overlapped with the GEMMs (`plan` chooses when not given)."),
        onoff("tp_async_backward", "Without --tp-comm-overlap, each column-parallel linear's backward collective "
                                   "runs beside its own GEMM (Megatron's default since 2021-09)."),
        onoff("ep_comm_overlap", "EP all-to-all overlapped with another micro-batch (`plan` chooses when not given)."),
        onoff("delay_wgrad", "Expert weight gradients delayed to hide the backward combine."),
        onoff("dispatch_fp8", "Forward MoE dispatch in FP8."),
        click.option("--fp8-recipe", "fp8_recipe", type=click.Choice([r.value for r in Fp8Recipe]), default=None,
                     help="FP8 scaling recipe under --precision fp8 (default: the accelerator's)."),
        click.option("--recompute-modules", "recompute_modules", default=None,
                     help="Comma list of Megatron --recompute-modules names for selective recompute (core_attn, "
                          "mla_up_proj, mlp, moe_act, layernorm, moe, shared_experts), torchtitan's per_op, or "
                          "MaxText's reruns (qkv_proj, out_proj, mlp_up); `plan` chooses when not given."),
        click.option("--recompute-num-layers", "recompute_num_layers", type=int, default=None,
                     help="Full recompute of only this many layers per virtual stage."),
        click.option("--mtp-layers", "mtp_layers", type=int, default=None, help="Multi-token-prediction layers."),
        click.option("--pipeline-layout", "pipeline_layout", default=None,
                     help="Megatron --pipeline-model-parallel-layout, e.g. 'Et|(tt|)*30L'."),
        onoff("account_for_embedding", "The embedding counts as a layer of the first pipeline stage."),
        onoff("account_for_loss", "The loss counts as a layer of the last pipeline stage."),
        click.option("--pipeline-schedule", "pipeline_schedule",
                     type=click.Choice([x.value for x in PipelineSchedule]), default=None,
                     help="Pipeline schedule (default 1f1b, interleaved when vpp > 1)."),
        click.option("--routing-imbalance", "routing_imbalance", type=float, default=None,
                     help="Tokens on the busiest expert rank over the mean (1.0: balanced)."),
        click.option("--moe-capacity-factor", "moe_capacity_factor", type=float, default=None,
                     help="Expert capacity factor (token dropping); default dropless."),
        onoff("cross_entropy_fusion", "Fused vocab-parallel cross-entropy."),
        onoff("loss_eager_float32", "The loss is PyTorch's cross-entropy on a float32 copy of the logits, run "
                                    "eagerly (torchtitan without compiling the loss): 12 bytes a logit held at its "
                                    "backward, not Megatron's 6 (default off; --framework torchtitan sets it per "
                                    "config)."),
        onoff("pipeline_p2p_whole", "Each TP rank sends the whole activation and gradient between pipeline stages "
                                    "(DeepSpeed with pipe_partitioned and grad_partitioned false), not its 1/tp "
                                    "share; under sequence parallelism it holds and sends its own shard, the same "
                                    "bytes."),
        onoff("pipeline_p2p_scatter", "Without sequence parallelism each TP rank still sends only its 1/tp share "
                                      "between pipeline stages (DeepSpeed's pipeline engine; Megatron-LM before "
                                      "Megatron-Core, 2023-01); default off: Megatron-Core sends the whole "
                                      "activation from every TP rank without sequence parallelism."),
        onoff("pipeline_grads_whole", "Activations go in 1/tp shares but each TP rank sends the whole gradient back "
                                      "(DeepSpeed before 2021-09 or grad_partitioned false)."),
        onoff("pipeline_p2p_blocking", "Each send and receive between pipeline stages is a blocking call of its own "
                                       "(DeepSpeed's pipeline engine): four transfer times per micro-batch on a "
                                       "middle stage, not Megatron's two paired ones."),
        onoff("pipeline_sends_mask", "Each forward send between pipeline stages also carries the s x s attention "
                                     "mask, whole from every TP rank (GPT-NeoX on DeepSpeed's pipeline engine)."),
        onoff("optimizer_state_bf16", "Adam moments in BF16."),
        onoff("optimizer_master_weights", "The optimizer keeps a float32 master copy of 16-bit weights (default "
                                          "on); off: it updates the 16-bit weights in place (MaxText with "
                                          "weight_dtype bfloat16), 4 bytes a parameter less."),
        onoff("norms_fused", "Each norm runs fused into the projection after it (Megatron-Core's Transformer Engine "
                             "spec, the default): `layernorm` recompute frees only MLA's input norm and an MoE "
                             "layer's pre-MLP norm; off, every norm (MaxText)."),
        onoff("remat_saves_named_only", "Selective recompute keeps only each layer's input and the tensors its "
                                        "modules name (JAX rematerialization under a MaxText remat_policy): no norm "
                                        "input, residual, permuted MoE token or activation output is saved."),
        onoff("expert_w1_rerun", "Under a selective recompute that keeps the up-projections, the routed experts' "
                                 "second up-projection reruns in backward and keeps no output (MaxText's sparse "
                                 "MoE path names it moe_mlpwi_1 only)."),
        onoff("fp32_weights", "Weights kept in float32 as the optimizer's master copy, cast to bf16 at use "
                              "(MaxText weight_dtype float32): 4 bytes of weights and 8 of Adam moments a "
                              "parameter; the gradients' width is --grad-reduce-fp32's (MaxText: on)."),
        onoff("fp32_weights_autocast", "The float32 weights (--fp32-weights) are torch's parameters under bf16 "
                                       "autocast (Lightning precision bf16): each GEMM's bf16 cast is held to its "
                                       "backward (2 bytes a weight), and under ZeRO-1/2 they stay whole on every "
                                       "rank, each updated shard broadcast in float32 (ZeroRedundancyOptimizer); "
                                       "off, MaxText's (stored sharded, a copy gathered for the step)."),
        onoff("fp8_saves_16bit_inputs", "Under FP8 the GEMMs keep their 16-bit inputs for backward (torchao "
                                        "Float8Linear, torchtitan), not 1-byte copies (Transformer Engine)."),
        onoff("fp8_recasts_weights", "Under FP8 every GEMM casts its 16-bit weight again in each forward and "
                                     "backward, every micro-batch, with no FP8 copy kept (torchao, torchtitan), not "
                                     "once a step (Transformer Engine)."),
        onoff("fp8_lm_head", "Under FP8 the LM head's GEMMs run FP8 too (torchtitan's llama3_8b_mxfp8), not 16-bit "
                             "(Transformer Engine's and torchtitan's Float8 configs keep it 16-bit)."),
        onoff("sp_saves_gathered_inputs", "Under sequence parallelism the projections keep their gathered, "
                                          "whole-sequence inputs for backward (torchtitan), not the shard (Megatron)."),
        onoff("tp_gathers_16bit", "Under FP8 with sequence parallelism the TP all-gathers move 16-bit values "
                                  "(torchtitan's row-wise Float8, MaxText), not FP8 (Transformer Engine quantises "
                                  "before it gathers; the reduce-scatters stay 16-bit either way)."),
        onoff("pipeline_unsharded_grads", "Under pipeline parallelism ZeRO-2/3 keeps the unsharded gradient (in its "
                                          "reduce width) until the stage's last backward and reduce-scatters once, "
                                          "after it (torch pipelining with FSDP2, torchtitan)."),
        onoff("reshard_after_backward", "ZeRO-2 reshards the weights after each micro-batch's backward and gathers "
                                        "them again for the next forward (FSDP2's default, torchtitan), not once a "
                                        "step (DeepSpeed, Megatron-FSDP)."),
        onoff("zero0_as_fsdp", "ZeRO-0 runs as FSDP2 over one-rank shards, its data-parallel ranks HSDP replicas "
                               "(torchtitan 0.3.0 applies FSDP always): priced as ZeRO-3 over a shard of one."),
        onoff("dp_reduce_every_microbatch", "The all-reduce over data-parallel replicas (FSDP2's HSDP, DDP) runs in "
                                            "every micro-batch's backward, not once a step (torchtitan's "
                                            "accumulation loop)."),
        onoff("optimizer_over_replicas", "Under HSDP the optimizer state (and float32 master weights) is sharded "
                                         "over the replicas too, the weights gathered back once a step (MaxText's "
                                         "shard_optimizer_over_data beside fsdp/expert sharding)."),
        onoff("optimizer_over_replicas_beside_fsdp", "--optimizer-over-replicas holds also on HSDP layouts with fsdp "
                                                     "ranks beside the expert ranks (default); off: only where the "
                                                     "expert (or context) ranks are the whole shard group, as "
                                                     "MaxText runs it."),
        onoff("fp8_params", "Primary weights kept in FP8 only (--fp8-param-gather)."),
        onoff("activation_func_fp8_input_store", "MLP activation input kept in FP8 for backward "
                                                 "(Megatron-Core's TransformerConfig field; Megatron-LM 0.19.2 has "
                                                 "no argument for it, so its files warn)."),
        click.option("--attention-kernel", "attention_kernel", type=click.Choice([k.value for k in AttentionKernel]),
                     default=None, help="Attention core: flash (fused, default), flash2 (FlashAttention-2: slower "
                                        "on Hopper) or unfused (scores in HBM, as the 2019-2022 Megatron runs)."),
        click.option("--cp-comm-type", "cp_comm_type", type=click.Choice([c.value for c in CpCommType]),
                     default=None, help="Context parallelism's K/V exchange: p2p ring hidden behind attention "
                                        "(default) or an exposed all_gather (Llama 3)."),
        click.option("--grad-accumulation", "grad_accumulation",
                     type=click.Choice([g.value for g in GradAccumulation]), default=None,
                     help="How micro-batch gradients accumulate: fused into the weight-gradient GEMM (default, "
                          "Megatron), autograd's 16-bit .grad += (DeepSpeed ZeRO-1 pipelines), fp32_copy "
                          "(DeepSpeed's BF16_Optimizer) or bf16_copy (the same with its buffer in bf16: "
                          "grad_accum_dtype unset at ZeRO stage 0)."),
        click.option("--grad-buckets", "grad_buckets", type=click.Choice([g.value for g in GradBuckets]), default=None,
                     help="How DDP / ZeRO-1 buckets the gradients it reduces during the last backward: by_size "
                          "(default: Megatron-Core, PyTorch DDP, DeepSpeed; see --ddp-bucket-params) or per_layer "
                          "(NeMo 1's Apex DistributedFusedAdam: a bucket per layer, the embedding and head in layer "
                          "0's). The bucket holding layer 0 reduces after the backward, beside no compute."),
        click.option("--ddp-bucket-params", "ddp_bucket_params", type=click.IntRange(1, None), default=None,
                     help="Parameters per gradient bucket (Megatron-LM --ddp-bucket-size; default Megatron-Core's "
                          "max(40M, 1M x dp x cp); NeMo 2 and Megatron-Bridge set 134217728)."),
        click.option("--grad-buffer-passes", "grad_buffer_passes", type=click.IntRange(0, 8), default=None,
                     help="Passes over the rank's whole gradient buffer each step at ZeRO-0/1 (default 3: "
                          "Megatron-Core's DDP zeroes it and scales it by 1/dp; 4 with its NaN check, Megatron-LM's "
                          "command line unless --no-check-for-nan-in-loss-and-grad; 2 fewer under "
                          "--ddp-average-in-collective; 0 for frameworks without Megatron-Core's buffer)."),
        onoff("grad_reduce_fp32", "Gradients accumulated and reduce-scattered in fp32 (Megatron under --bf16)."),
        onoff("grad_all_reduce", "ZeRO-1 all-reduces the whole gradient before updating its shard (DeepSpeed's "
                                 "BF16_Optimizer), not a reduce-scatter."),
        onoff("dp_overlap", "DP gradient reduce-scatter and parameter all-gather overlapped (default on)."),
        onoff("pp_comm_overlap", "An interleaved pipeline's sends and receives beside the chunks' compute (default on: "
                                 "Megatron's overlap_p2p_comm; off: --no-overlap-p2p-communication)."),
        onoff("param_gather_overlap", "ZeRO-1/2's all-gather of the updated weights behind the next forward (default "
                                      "on; Megatron --overlap-param-gather); off: before it (DeepSpeed ZeRO-1/2)."),
        onoff("align_param_gather", "Under interleaving, ZeRO-1's first two chunks gathered whole when the schedule "
                                    "starts, so chunk 0's first forward waits for its whole gather (default on: "
                                    "Megatron-Core 0.9+, NeMo 2, Megatron-Bridge; off: --no-align-param-gather)."),
        onoff("moe_fusions", "MoE permute/router/quantisation fusions (default on)."),
        onoff("fused_model_ops", "The model's element-wise extras (YaRN RoPE, a partial RoPE's concatenation, "
                                 "SwiGLU clamp, expert biases, bias-dropout-add) run fused (default on); off prices "
                                 "them eager, as Megatron-Core 0.15-0.17 runs GPT-OSS and GPT-NeoX its partial RoPE "
                                 "and, without bias_dropout_fusion, its biases."),
        onoff("cpu_affinity", "Each rank bound to its GPU's CPU cores and NUMA node (default on)."),
        onoff("cuda_launch_blocking", "The job runs with CUDA_LAUNCH_BLOCKING=1: every kernel's host time adds to "
                                      "the step and no communication overlaps compute (default off)."),
        onoff("checkpoint_sync", "DeepSpeed's activation checkpointing synchronizes the device around every "
                                 "checkpointed chunk (GPT-NeoX synchronize_each_layer; default off)."),
        click.option("--checkpoint-interval", "checkpoint_interval", type=click.IntRange(1, 1024), default=None,
                     help="Layers DeepSpeed checkpoints as one chunk (pipeline.activation_checkpoint_interval, "
                          "GPT-NeoX checkpoint_num_layers; default 1): one saved input per chunk, a whole chunk "
                          "rebuilt at once in backward, and how often --checkpoint-sync synchronizes."),
        click.option("--loss-chunks", "loss_chunks", type=click.IntRange(1, 1024), default=None,
                     help="Chunks the LM head and loss run in, one after another (torchtitan 0.3.0's "
                          "ChunkedLossWrapper: 8): the logits held at once are one chunk's (default 1)."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _recipe_flag_values(kwargs: dict) -> tuple[str | None, dict]:
    """Pop the recipe options out of a command's keyword arguments: (--recipe file, {field: value} set)."""
    recipe_file = kwargs.pop("recipe_file", None)
    given = {}
    for field in RECIPE_FLAGS:
        value = kwargs.pop(field, None)
        if value is not None:
            given[field] = value
    return recipe_file, given


def build_recipe(recipe_file: str | None, given: dict) -> tuple[Recipe, dict[str, str]]:
    """(Recipe, field -> "flag" | "file:PATH") from --recipe FILE and the recipe flags; flags override the
    file.  Each bad value is an InputError naming its flag or file, the field, the value and the fix."""
    from pathlib import Path

    from placement.loaders.files import parse_yaml, read_text

    for field, value in given.items():  # each flag on its own, so the message names the flag
        try:
            Recipe.model_validate({field: value})
        except ValidationError as err:
            raise InputError(format_validation_error(err, f"{RECIPE_FLAGS[field]} {value}")) from None
    from_file: dict = {}
    if recipe_file is not None:
        path = Path(recipe_file)
        text = read_text(path, "recipe file", "give a YAML mapping of recipe fields")
        data = parse_yaml(text, path, "recipe")
        if data is None or data == {}:  # a file from which nothing was read is an error, not the defaults
            raise InputError(f"{path}: the recipe file names no field; write one `field: value` per line "
                             f"(moe_dispatcher: hybridep, ...), or drop --recipe for the defaults")
        if not isinstance(data, dict):
            raise InputError(f"{path}: a recipe is a YAML mapping of fields (moe_dispatcher: hybridep, ...), got a "
                             f"{type(data).__name__}; write one `field: value` per line")
        for k, v in data.items():  # YAML types only: pydantic would read "yes" or 1 as true, true or "2" as a number
            info = Recipe.model_fields.get(str(k))
            kind = None if info is None else info.annotation
            if kind is bool and not isinstance(v, bool):
                raise InputError(f"{path}: {k} must be true or false, got {v!r}; write true or false without quotes")
            number = kind in (int, float, int | None, float | None)
            if number and v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise InputError(f"{path}: {k} must be a number, got {v!r}; write the number without quotes")
        try:
            Recipe.model_validate(data)
        except ValidationError as err:
            raise InputError(format_validation_error(err, str(path))) from None
        from_file = {str(k): v for k, v in data.items()}
    merged = from_file | given
    try:
        recipe = Recipe.model_validate(merged)
    except ValidationError as err:
        where = " and ".join(x for x in (recipe_file and f"{recipe_file}", given and "the recipe flags") if x)
        raise InputError(format_validation_error(err, f"recipe ({where})")) from None
    sources = {f: f"file:{recipe_file}" for f in from_file} | {f: "flag" for f in given}
    if recipe.fp32_weights_autocast and not (recipe.fp32_weights and recipe.grad_reduce_fp32):
        # torch gives a parameter's .grad the parameter's dtype: float32 parameters under autocast have float32
        # gradients, which DDP reduces as they are (a 16-bit gradient would price a job that cannot run)
        missing = [RECIPE_FLAGS[f] for f in ("fp32_weights", "grad_reduce_fp32") if not getattr(recipe, f)]
        where = sources.get("fp32_weights_autocast", "flag")
        raise InputError(f"{RECIPE_FLAGS['fp32_weights_autocast']} ({'the flag' if where == 'flag' else where}) "
                         f"prices torch's autocast over float32 parameters, whose gradients torch keeps and reduces in "
                         f"float32, but {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} off; add "
                         f"{' '.join(missing)}, or drop {RECIPE_FLAGS['fp32_weights_autocast']}")
    return recipe, sources


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise InputError(f"{name} {value}: must be a positive integer")


def build_topology(cluster_ref, gpus, nodes, slurm_topology, nodelist, node_type, cluster_graph,
                   oversubscription, segment=None, gpus_used_per_node: int | None = None) -> Topology:
    """A catalog cluster at a size, or a real allocation (SLURM topology + host list, or a graph); on a catalog
    cluster, `gpus_used_per_node` of each node's GPUs (a job that starts fewer processes per node)."""
    real = slurm_topology is not None or cluster_graph is not None
    if not real:
        for flag, value in (("--nodelist", nodelist), ("--node-type", node_type or None),
                            ("--oversubscription", oversubscription)):
            if value is not None:
                # a user trial's purchase what-if (`--cluster dgx-h100 --oversubscription 4`) was told no way to run it
                what_if = (f"; on a catalog cluster, copy its file ({cluster_file(cluster_ref)}) with "
                           f"tiers[0].oversubscription: {value:g} and pass it as --cluster FILE, or sweep it (a "
                           f"design's `oversubscription: {value:g}`, or `placement sweep FILE --set "
                           f"oversubscription={value:g}`)" if flag == "--oversubscription" else "")
                raise InputError(f"{flag} goes with --slurm-topology or --cluster-graph, which were not given"
                                 + what_if)
        cluster = load_cluster(cluster_ref)
        # a job on part of one node is that node's first GPUs, as `plan --gpus N` lays it (a user trial: plan's own
        # 7-GPU files were refused by the audit); part of each of several nodes needs hosts of that many GPUs
        one_node = (nodes in (None, 1) and gpus is not None and gpus == gpus_used_per_node)
        if gpus_used_per_node is not None and not one_node:
            cluster = partial_nodes(cluster, gpus_used_per_node)
        return Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=gpus, num_nodes=nodes,
                        segment_nodes=segment)
    if slurm_topology is not None and cluster_graph is not None:
        raise InputError("give --slurm-topology or --cluster-graph, not both")
    if segment is not None and cluster_graph is not None:
        raise InputError(f"--segment {segment} goes with a block-plugin --slurm-topology or a catalog --cluster; a "
                         f"cluster graph lists each host's switches itself: drop --segment")
    if oversubscription is not None and cluster_graph is not None:
        # a review: it was accepted, not applied, and then named as the source of the graph's own ratios
        raise InputError(f"--oversubscription {oversubscription:g} goes with --slurm-topology or a catalog "
                         f"--cluster; a cluster graph's link bandwidths give each switch's down:up ratio: drop the "
                         f"flag, or set the links in the graph")
    from pathlib import Path

    from placement.fabric import real_topology

    topo = real_topology(Path(slurm_topology) if slurm_topology else None,
                         Path(cluster_graph) if cluster_graph else None, nodelist, list(node_type), oversubscription,
                         segment)
    # a real allocation's size is its host list's: a --gpus/--nodes that says the same is redundant, another is wrong
    for flag, value, have in (("--gpus", gpus, topo.num_gpus), ("--nodes", nodes, topo.num_hosts)):
        if value is not None and value != have:
            raise InputError(f"{flag} {value}: the allocation has {topo.num_hosts} hosts and {topo.num_gpus} GPUs "
                             f"(its host list sets the job's size); drop {flag}, or give the host list of the job you "
                             f"mean")
    return topo


def partial_nodes(cluster, used: int):
    """The cluster as a job sees it that runs `used` processes on each node: hosts of `used` GPUs, each still with
    the cluster's per-GPU NIC share (a node with fewer NICs than GPUs may give the used ones more: the source says
    so), its NVLink domain the used GPUs (NVSwitch: full rate between any two), the switch tiers as they are (a leaf
    holds as many hosts).  Only for a scale-up domain of one node that `used` divides."""
    if cluster.scale_up.size != cluster.gpus_per_node or cluster.gpus_per_node % used:
        raise InputError(f"the launch files start {used} processes per node, but {cluster.name}'s "
                         f"{cluster.gpus_per_node}-GPU nodes sit in scale-up domains of {cluster.scale_up.size} GPUs: "
                         f"placement cannot lay out part of each node there; give a cluster file whose nodes have "
                         f"{used} GPUs (--cluster FILE)")
    return cluster.model_copy(update={"gpus_per_node": used,
                                      "scale_up": cluster.scale_up.model_copy(update={"size": used})})


def build_job(model_ref, cluster_ref, gpus, nodes, seq_len, global_batch, precision, slurm_topology=None,
              nodelist=None, node_type=None, cluster_graph=None, oversubscription=None, node_topo=None, segment=None,
              memory_headroom_gib=0.0, gpus_used_per_node: int | None = None):
    """Flags -> (ModelSpec, TrainingSpec, Topology); every failure is an InputError."""
    for name, value in (("--gpus", gpus), ("--nodes", nodes), ("--seq-len", seq_len),
                        ("--global-batch", global_batch)):
        _positive(name, value)
    for name, value, most in (("--seq-len", seq_len, MAX_SEQ_LEN), ("--global-batch", global_batch, MAX_GLOBAL_BATCH)):
        if value is not None and value > most:
            raise InputError(f"{name} {value}: more than the {most:,} placement plans; check the number for a typo")
    ctx = click.get_current_context(silent=True)
    if ctx is not None and "cluster_ref" in ctx.params and (slurm_topology or cluster_graph) \
            and ctx.get_parameter_source("cluster_ref") is not click.core.ParameterSource.DEFAULT:
        given = "--slurm-topology" if slurm_topology else "--cluster-graph"
        raise InputError(f"--cluster {cluster_ref} and {given} both describe the machine; give one (the node design "
                         f"of a real cluster goes in --node-type)")
    model = load_model(model_ref)
    topo = build_topology(cluster_ref, gpus, nodes, slurm_topology, nodelist, node_type, cluster_graph,
                          oversubscription, segment, gpus_used_per_node)
    if node_topo is not None:
        from pathlib import Path

        from placement.loaders.nvidia_smi import load_topo_matrix

        topo = topo.with_node_topo(load_topo_matrix(Path(node_topo)))
        if topo.node_topo_note is not None:
            click.echo(f"placement: warning: {topo.node_topo_note}", err=True)
    _, profile = _calibration()
    if profile is not None:
        from placement.calibration.profile import calibrated, design_differences

        topo_uncalibrated = topo
        topo = calibrated(topo, profile)
        warning = design_differences(profile, topo.cluster)
        if warning is not None:
            click.echo(f"placement: warning: {warning}", err=True)
        if ctx is not None:
            ctx.meta["uncalibrated_topology"] = topo_uncalibrated
            ctx.meta["calibration_design_warning"] = warning
    headroom = _memory_headroom_bytes(memory_headroom_gib, topo)
    train = TrainingSpec(seq_len=seq_len or model.default_seq_len,
                         global_batch=global_batch or model.default_global_batch, precision=Precision(precision),
                         memory_headroom_bytes=headroom)
    if ctx is not None:
        defaults = job_defaults(model, seq_len, global_batch)
        if ("cluster_ref" in ctx.params and slurm_topology is None and cluster_graph is None
                and ctx.get_parameter_source("cluster_ref") is click.core.ParameterSource.DEFAULT):
            # a QA note: a job without --cluster was priced on DGX H100 with no word that the machine was a default
            defaults = {"cluster": f"{cluster_ref}: placement's default machine (give --cluster NAME or FILE; "
                                   f"`placement show clusters` lists the catalog)"} | defaults
        if gpus is None and nodes is None and slurm_topology is None and cluster_graph is None:
            # the catalog cluster's own size (a user trial: 1,024 GPUs with no word of where they came from)
            defaults = {"num_gpus": f"{topo.num_gpus}: cluster {topo.cluster.name}'s default_num_gpus (give --gpus N "
                                    f"or --nodes N)"} | defaults
        most = topo.cluster.segment_nodes
        if segment is None and most and topo.segment_nodes is not None and topo.segment_nodes < most \
                and slurm_topology is None and cluster_graph is None:
            # a user trial: 19 GB200 trays took --segment 1 unsaid, each NVLink domain priced as one tray's 4 GPUs
            gph, nodes_n = topo.cluster.gpus_per_node, topo.num_gpus // topo.cluster.gpus_per_node
            defaults["segment_nodes"] = (
                f"{topo.segment_nodes}: the largest divisor of the job's {nodes_n} nodes up to cluster "
                f"{topo.cluster.name}'s segment_nodes {most}, as Megatron-Bridge's launcher passes `sbatch --segment`, "
                f"so each NVLink domain is priced as {topo.segment_nodes * gph} GPUs (give --segment 0 for racks "
                f"filled whole, or a node count with a larger divisor, a multiple of {most})")
        ctx.meta["job_defaults"] = defaults
    return model, train, topo


def job_defaults(model, seq_len: int | None, global_batch: int | None) -> dict[str, str]:
    """The job's sequence length and global batch that come from neither a flag nor the model file (ModelSpec's own
    defaults), or from a model file that calls them its planning defaults (default_seq_len_note,
    default_global_batch_note), each with its value and the fix: a user trial's model file without default_seq_len
    and default_global_batch was planned at 4096 x 1024, said nowhere.  Printed as a note and under `job_defaults`."""
    out = {}
    for field, flag, given, key in (("seq_len", "--seq-len", seq_len, "default_seq_len"),
                                    ("global_batch", "--global-batch", global_batch, "default_global_batch")):
        if given is None and key not in model.model_fields_set:
            out[field] = (f"{getattr(model, key)}: placement's default; {model.name} states no {key} (give {flag} or "
                          f"set {key} in the model file)")
        elif given is None and getattr(model, f"{key}_note"):
            out[field] = f"{getattr(model, key)}: {getattr(model, f'{key}_note')} (give {flag})"
    return out


def _job_defaults_json() -> dict[str, str]:
    """`job_defaults` of this command's job (build_job)."""
    ctx = click.get_current_context(silent=True)
    return dict((ctx.meta.get("job_defaults") or {}) if ctx is not None else {})


def _job_defaults_note() -> None:
    """The note of `job_defaults` on stderr (text output)."""
    for field, why in _job_defaults_json().items():
        click.echo(f"placement: note: {field.replace('_', ' ')} {why}", err=True)


def _uncalibrated_step(model, train, best, recipe_sources, model_sources, framework: str | None = None) -> None:
    """With --calibration, the best plan's layout and recipe priced again with the catalog's constants (kept in
    the context for the calibration line and JSON)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None or best is None or "uncalibrated_topology" not in ctx.meta:
        return
    from placement.evaluate import evaluate_layout

    plain = evaluate_layout(model, train, ctx.meta["uncalibrated_topology"], best.layout_spec(), best.recipe_spec(),
                            recipe_sources, model_sources, torch_pipeline=framework == "torchtitan")
    ctx.meta["calibrated_step_time_s"] = best.step_time_s
    ctx.meta["uncalibrated_step_time_s"] = plain.step_time_s


def _memory_headroom_bytes(gib: float | None, topo) -> float:
    """--memory-headroom-gib in bytes; refused when negative, not a number, or all of what a GPU holds."""
    from placement.cost.constants import ALLOCATOR_FRAGMENTATION, GiB
    from placement.cost.step import usable_hbm_bytes

    gib = gib or 0.0
    usable = usable_hbm_bytes(topo)
    if not math.isfinite(gib) or gib < 0:
        raise InputError(f"--memory-headroom-gib {gib}: give the GiB per GPU to keep free, 0 or more")
    if gib * GiB >= usable:
        raise InputError(f"--memory-headroom-gib {gib:g}: each {topo.accelerator.name} holds {usable / GiB:.1f} GiB "
                         f"for the job (its HBM less {ALLOCATOR_FRAGMENTATION * 100:g} % fragmentation); keep less "
                         f"than that free")
    return gib * GiB


class _Placement(click.Group):
    """The `placement` group: click's own usage errors (a flag it does not know, a value its type refuses, a missing
    option) are one paragraph on stderr, exit 2, naming the flag, the value and the fix, as placement's input errors
    are (a user trial: click's Usage / Try / Error blocks, and `--gpus eight` named no fix)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.NoArgsIsHelpError as err:  # `placement` alone: its help, as click prints it
            err.show()
            sys.exit(err.exit_code)
        except click.UsageError as err:
            click.echo(f"placement: {usage_message(err)}", err=True)
            sys.exit(err.exit_code)
        except click.ClickException as err:
            err.show()
            sys.exit(err.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


_TYPE_FIX = {"is not a valid integer": "give a whole number", "is not a valid float": "give a number",
             "is not a valid boolean": "give true or false"}
"""The fix of a value click's parameter types refuse, by the words of its message."""


def usage_message(err: click.UsageError) -> str:
    """A click usage error as one paragraph: click's words (the flag and the value), the fix where its words give
    none, and where the command's flags are listed."""
    text = " ".join(err.format_message().split()).rstrip(".")
    sub = err.ctx.command_path.partition(" ")[2] if err.ctx is not None else ""  # the root as its users type it
    where = f"`placement {sub} -h`" if sub else "`placement -h`"
    fix = next((f for words, f in _TYPE_FIX.items() if words in text), None)
    if isinstance(err, click.MissingParameter):
        fix = "give it"
    if isinstance(err, click.NoSuchOption) and err.option_name == "--reproducible" and sub:
        # a group option after the subcommand (a user trial wrote `placement plan ... --reproducible`)
        return (f"--reproducible is an option of `placement` itself, not of `{sub}`: put it before the command, "
                f"`placement --reproducible {sub} ...`, or set PLACEMENT_REPRODUCIBLE=1")
    return f"{text}; {fix + ' (' if fix else ''}see {where} for the flags and their values{')' if fix else ''}"


@click.group(cls=_Placement, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="placement")
@click.option("--reproducible", is_flag=True, envvar="PLACEMENT_REPRODUCIBLE",
              help="Leave out the wall-clock timings (search.seconds, mapping_solver.wall_s: null), so the same "
                   "input prints the same bytes; also PLACEMENT_REPRODUCIBLE=1.")
@click.pass_context
def main(ctx: click.Context, reproducible: bool) -> None:
    """Choose and map the parallel layout of a training job onto a GPU cluster."""
    ctx.obj = {"timings": not reproducible}


def _timings() -> bool:
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx is not None else None
    return bool(root is None or root.obj is None or root.obj.get("timings", True))


def _modules_need_selective(recipe: Recipe, recompute: tuple[str, ...]) -> None:
    """--recompute-modules names what selective recompute reruns: a conflict where --recompute rules it out."""
    if recipe.recompute_modules and Recompute.SELECTIVE.value not in recompute:
        raise InputError(f"--recompute-modules {','.join(m.value for m in recipe.recompute_modules)} names what "
                         f"selective recompute reruns, but --recompute allows only {', '.join(recompute)}: add "
                         f"--recompute selective, or drop --recompute-modules")


def _check_moe_recipe(recipe: Recipe, sources: dict[str, str], model: ModelSpec) -> None:
    """A recipe field only an MoE model prices, given for a dense one: bad input, as --ep is (a user trial:
    `--moe-dispatcher deepep --routing-imbalance 1.5` on Llama 3 8B were echoed in the recipe line and priced
    nothing)."""
    if model.is_moe:
        return
    from placement.calibration.published import MOE_ONLY

    # flags only: a --recipe file may be shared with MoE jobs
    given = sorted(RECIPE_FLAGS.get(f, f) for f in MOE_ONLY if sources.get(f) == "flag")
    if given:
        raise InputError(f"{', '.join(given)}: {model.name} has no experts, so nothing of it is priced; drop it (it "
                         f"sets the MoE layers' dispatch, routing or capacity)")


FP8_ONLY_FLAGS = ("fp8_recipe", "fp8_params")
"""Recipe fields that price nothing in a 16-bit run: the FP8 scaling recipe and FP8 weights."""


def _check_fp8_recipe(recipe: Recipe, sources: dict[str, str], precision: Precision) -> None:
    """An FP8 recipe flag on a 16-bit run prices nothing: bad input, as an MoE flag on a dense model is (a user
    trial: `--fp8-recipe blockwise` without `--precision fp8` printed "recipe: fp8 blockwise" under a bf16 headline
    and the bf16 step)."""
    given = sorted(RECIPE_FLAGS[f] for f in FP8_ONLY_FLAGS
                   if sources.get(f) == "flag" and getattr(recipe, f) not in (None, False))
    if precision is not Precision.FP8 and given:
        raise InputError(f"{', '.join(given)}: the run is {precision.value} (--precision, bf16 unless given), so "
                         f"nothing of it is priced; add --precision fp8 to price FP8 GEMMs, or drop it")


def _check_recompute_num_layers(recipe: Recipe, sources: dict[str, str], recompute: tuple[str, ...],
                                 model: ModelSpec, pp: int | None = None, vpp: int | None = None) -> None:
    """--recompute-num-layers N is full recompute of N layers per virtual stage: it needs full recompute allowed,
    and a stage that holds N layers (more would be priced as the stage's, silently)."""
    n = recipe.recompute_num_layers
    if n is None:
        return
    source = sources.get("recompute_num_layers", "flag")
    given = f"recompute_num_layers {n} ({source.removeprefix('file:')})" if source.startswith("file:") \
        else f"--recompute-num-layers {n}"
    if Recompute.FULL.value not in recompute:
        raise InputError(f"{given} is full recompute of {n} layers per stage, but --recompute allows only "
                         f"{', '.join(recompute)}: add --recompute full, or drop the number of layers")
    even = pp is not None and recipe.pipeline_layout is None  # a written pipeline layout may load one stage more
    chunks = pp * (vpp or 1) if even else 1
    most = -(-model.num_layers // chunks)
    if n > most:
        where = (f"at pp {pp} and vpp {vpp} a stage of {model.name} holds at most {most} layers (ceil of "
                 f"{model.num_layers} layers / {chunks} stages)" if even else f"{model.name} has {most} layers")
        raise InputError(f"{given}: {where}; give 1 to {most}, or drop it to recompute every layer of the stage")


_SIGNALLED: list[int] = []
"""The SIGTERMs received: an exception raised after one is its casualty, not a bug (numpy turns a KeyboardInterrupt
raised inside a structured-array comparison into a TypeError)."""


def _interrupt(signum, frame):
    """SIGTERM (a scheduler's cancel, `kill`) stops a command as Ctrl-C does: exit 130, every file written whole."""
    _SIGNALLED.append(signum)
    raise KeyboardInterrupt


FRAMEWORK_CHOICES = list(CAPABILITIES)
FRAMEWORK_HELP = ("Plan only the layouts and recipe features this framework launches exactly as priced (megatron-core "
                  "0.19.2, torchtitan 0.3.0, DeepSpeed 0.19.8, MaxText 0.2.5: placement/frameworks.py).")
EMIT_HELP = ("Framework configs to write into --out: a comma list of torchtitan, megatron, devicemesh, deepspeed, "
             "maxtext, or all (repeatable: each --emit adds its formats).")


def _check_out(out_dir, emit_formats, framework: str | None = None) -> list[str] | None:
    """The --emit formats, with --out checked before any work (a bad --out is bad input, not a crash after
    the search).  With --framework and --out but no --emit, the framework's own files (a user trial: `--framework
    megatron --out DIR` wrote no megatron.sh and said nothing), said on stderr.  `--emit` given several times adds
    each one's formats (a QA trial's `--emit megatron --emit torchtitan --emit deepspeed --emit maxtext` wrote only
    maxtext's files, click keeping the last, and priced the search for maxtext alone)."""
    if isinstance(emit_formats, tuple):
        emit_formats = ",".join(emit_formats) if emit_formats else None
    if emit_formats is None and framework is not None and out_dir is not None:
        emit_formats = framework
        click.echo(f"placement: note: --framework {framework} --out: writing {framework}'s files too (--emit "
                   f"FORMATS to choose others)", err=True)
    if emit_formats is not None and out_dir is None:
        raise InputError("--emit writes files: give --out DIR as well")
    formats = None
    if emit_formats is not None:
        from placement.emit.writer import parse_formats

        formats = parse_formats(emit_formats)
    if out_dir is not None:
        from placement.emit.writer import output_names
        from placement.mapping.report import LAUNCH_FILES
        from placement.outfiles import check_out_dir

        check_out_dir(out_dir, [*LAUNCH_FILES, "launch.sbatch", *output_names(formats or [])])
    return formats


def _write_out(out, formats: list[str] | None, chosen, gpu_of_rank, topo, model, train) -> list[str]:
    """The plan's launch files (host order, hostfiles, rankfile) and its --emit framework files, into `out`; returns
    each framework file's own "this file runs ..." header line, where the file runs other than the plan (the
    command prints them beside the plan, whose numbers are then not the file's)."""
    from placement.emit import sbatch
    from placement.emit.common import EmitContext
    from placement.emit.writer import write
    from placement.mapping.report import write_launch_files
    from placement.outfiles import write_atomic

    header = (f"placement {__version__}: {chosen.model} on {chosen.num_gpus} x {chosen.accelerator}, "
              f"predicted step {chosen.step_time_s:.3f} s\nranks: tp innermost, then cp, dp, pp")
    for path in write_launch_files(out, topo, gpu_of_rank, header):
        click.echo(f"wrote {path}", err=True)
    ctx = EmitContext.of(chosen, topo, gpu_of_rank, model, train)
    click.echo(f"wrote {write_atomic(out / 'launch.sbatch', sbatch.render(ctx, formats or []))}", err=True)
    if not sbatch.launched(formats or []):  # a DeviceMesh alone: the script starts nothing, and says so
        click.echo(f"placement: note: launch.sbatch launches nothing that was emitted ("
                   f"{'; '.join(sbatch.NOT_LAUNCHED[f] for f in formats or [] if f in sbatch.NOT_LAUNCHED)})",
                   err=True)
    if not formats:
        return []
    paths, warnings, runs = write(ctx, formats, out)
    for path in paths:
        click.echo(f"wrote {path}", err=True)
    for w in warnings:
        click.echo(f"placement: warning: {w}", err=True)
    return runs


def _over_capacity(files_run: list[str]) -> list[str]:
    """The written files whose own "this file runs" line says they run out of memory."""
    from placement.emit.common import OVER_CAPACITY

    return [line.split(":", 1)[0] for line in files_run if OVER_CAPACITY in line]


def _not_starting(files_run: list[str]) -> list[str]:
    """The written files whose header says their framework refuses them at start-up."""
    from placement.emit.common import NOT_STARTING

    return [line.split(":", 1)[0] for line in files_run if line.split(": ", 1)[-1].startswith(NOT_STARTING)]


def _fail_files(files_run: list[str], framework: str | None, command: str) -> None:
    """Exit 1 where a file the command wrote will not run as the plan: what it runs instead is over the GPU's memory
    (a user trial: `--emit all` wrote a torchtitan.sh that runs out of memory, with exit 0), or its framework refuses
    it at start-up; after the output and the files, as `evaluate` exits over capacity.  The fix names the formats
    (a format's extra files, jax_mesh.py beside maxtext.yml, are its own)."""
    over, refused = _over_capacity(files_run), _not_starting(files_run)
    if not over and not refused:
        return
    from placement.emit.writer import FORMATS, output_names

    def formats(files: list[str]) -> list[str]:
        return [fmt for fmt in FORMATS if set(output_names([fmt])) & set(files)]

    bad = formats(over + refused)
    why = []
    if over:
        names = [FORMATS[f][0] for f in formats(over)]
        why.append(f"what {' and '.join(names)} run{'s' if len(names) == 1 else ''} instead of the plan is over the "
                   f"GPU's memory")
    if refused:
        names = [FORMATS[f][0] for f in formats(refused)]
        why.append(f"{' and '.join(names)} {'is' if len(names) == 1 else 'are'} refused at start-up by "
                   f"{'its' if len(names) == 1 else 'their'} framework")
    able = [f for f in bad if f in CAPABILITIES]
    if command == "audit":  # its file is the best plan in the job's own framework: nothing to leave out
        _fail(EXIT_INFEASIBLE,
              f"written, but not runnable as the best plan: {'; '.join(why)} (its header says what it runs and why); "
              f"do not launch it as written: apply the changes listed above to the job's own files, or plan the job "
              f"with `placement plan ... --framework {framework}`")
    if framework is not None or not able:
        fix = ""
    elif command == "plan":
        fix = (f"plan for what {'it' if len(able) == 1 else 'each'} runs with "
               f"{' or '.join(f'--framework {f}' for f in able)}, or ")
    else:  # evaluate's layout is the user's: --framework F there refuses it where F cannot run it
        fix = (f"find a layout {' or '.join(able)} runs as priced with `placement plan ... "
               f"{' or '.join(f'--framework {f}' for f in able)}`, or ")
    _fail(EXIT_INFEASIBLE,
          f"written, but not runnable as the plan: {'; '.join(why)} (each file's header says what it runs and why); "
          f"{fix}leave {', '.join(bad)} out of --emit")


@main.command()
@job_options
@click.option("--top-k", type=click.IntRange(1, 100), default=5, show_default=True, help="Plans to return.")
@click.option("--recompute", type=click.Choice([r.value for r in Recompute]), multiple=True,
              help="Allowed recompute modes (repeatable; default all).")
@click.option("--zero", type=click.IntRange(0, 3), multiple=True, help="Allowed ZeRO stages (repeatable; default 1-3).")
@click.option("--map/--no-map", "do_map", default=None,
              help="Map ranks to GPUs with CP-SAT (default: on for --slurm-topology/--cluster-graph).")
@click.option("--map-time-limit", type=_SECONDS, default=1.0, show_default=True,
              help="CP-SAT deterministic time for the whole plan, shared by the candidates that need a solve (a "
                   "candidate whose allocation order meets the flat-fabric bound needs none).")
@click.option("--exhaustive", is_flag=True,
              help="Also price what the search leaves out as dominated (ZeRO-0, selective recompute under fused "
                   "attention, sequence parallelism off); the best plan is the same.")
@click.option("--out", "out_dir", type=click.Path(), default=None,
              help="Write the plan's launch files (host order, SLURM hostfile, MPI rankfile, --emit formats) here.")
@click.option("--emit", "emit_formats", multiple=True, help=EMIT_HELP)
@click.option("--plan-index", type=click.IntRange(1, 100), default=1, show_default=True,
              help="Which of the ranked plans the files realize (1 = best).")
@click.option("--framework", type=click.Choice(FRAMEWORK_CHOICES), default=None, help=FRAMEWORK_HELP)
@click.option("--report", "report_file", default=None,
              help=REPORT_HELP.format(what="the best plan's groups on the topology, its step and memory, the "
                                           "mapping against the baselines, the top-k table"))
@recipe_options
@handle_errors
def plan(model_ref, cluster_ref, gpus, nodes, segment, seq_len, global_batch, precision, memory_headroom_gib,
         as_json, slurm_topology, nodelist, node_type, cluster_graph, oversubscription, node_topo, top_k, recompute,
         zero, do_map, map_time_limit, exhaustive, out_dir, emit_formats, plan_index, framework, report_file,
         **recipe_args):
    """Search every layout; map the best onto the machine; print them, best first."""
    from placement.cost.step import default_choices
    from placement.emit.common import framework_choices
    from placement.mapping.config import SolverConfig
    from placement.planner import plan_job
    from placement.report import allocator_setter, plan_json, plan_table, without_timings
    from placement.search import SearchConfig, default_zero_stages, searched_sources

    recipe, sources = build_recipe(*_recipe_flag_values(recipe_args))
    if recompute:  # the modes the user allows (none given: all of them)
        _modules_need_selective(recipe, recompute)
    if out_dir is None and click.get_current_context().get_parameter_source("plan_index") not in (
            click.core.ParameterSource.DEFAULT, None):  # a user trial: the flag was ignored without a word
        raise InputError(f"--plan-index {plan_index} picks the plan whose files --out writes; give --out DIR (the "
                         f"table lists every plan without it)")
    model, train, topo = build_job(model_ref, cluster_ref, gpus, nodes, seq_len, global_batch, precision,
                                   slurm_topology, nodelist, node_type, cluster_graph, oversubscription, node_topo,
                                   segment, memory_headroom_gib)
    recipe, sources = model_recipe(model, recipe, sources, framework)
    recipe, sources = _framework_recipe(framework, recipe, sources, train.precision, model, topo)
    given_model = model  # the files' own model code (DeepSpeed, a device mesh) runs it as given
    model, model_sources = model_as_run(framework, model, f"--framework {framework}")
    _check_recompute_num_layers(recipe, sources, recompute or tuple(r.value for r in Recompute), model)
    _check_moe_recipe(recipe, sources, model)
    _check_fp8_recipe(recipe, sources, train.precision)
    formats = _check_out(out_dir, emit_formats, framework)
    report = _check_report(report_file)
    # the recipe fields the user left open are searched: each choice field, and the recompute modules
    if framework is not None:
        check_precision(framework, model, train.precision.value, topo.accelerator)
        check_seq_len(framework, model, train.seq_len, train.precision.value, topo.accelerator)
    # --framework F plans what F runs: the other --emit formats' files then say in their headers what they run (a
    # user trial: `--emit torchtitan,devicemesh` under --framework torchtitan narrowed torchtitan.sh to a plan 4.8 %
    # slower); without --framework the search keeps to what every named format launches as priced
    launched = [framework] if framework else list(formats or [])
    choices = default_choices(model.is_moe, topo, recipe, pinned=frozenset(sources))
    open_choices = choices
    choices, module_sets = framework_choices(launched, choices,
                                             recipe.recompute_modules if "recompute_modules" in sources else None)
    # the pipeline split is searched where the recipe leaves it open and every emitted format can state it
    # (Megatron's --account-for-*-in-pipeline-split); torchtitan, DeepSpeed and MaxText files keep the default
    splits = (0,) if launched and set(launched) - {"megatron"} else None
    if module_sets == () and recompute and set(recompute) <= {Recompute.SELECTIVE.value}:
        raise InputError(f"--recompute selective with --emit {','.join(formats or [])}"
                         f"{f' --framework {framework}' if framework else ''}: these formats share no selective "
                         f"recompute they launch as priced (torchtitan's is its per-op policy; Megatron-LM names its "
                         f"modules; MaxText's 'minimal' reruns attention and norms; DeepSpeed's model code the "
                         f"attention core); give --recompute-modules LIST (a file that cannot run it says what it "
                         f"runs instead), or emit fewer formats")
    narrowed_note = None
    if framework is None:  # under --framework the other formats narrow nothing (launched, above)
        narrowed_note = _say_emit_narrows(formats or [], open_choices, choices, module_sets,
                                          splits_narrowed=splits is not None)
    if framework and zero:
        # a stage the framework does not run leaves no layout to price (a user trial: exit 3, an internal error)
        able = able_for(framework, model, train, topo)
        missing = sorted(set(zero) - set(able.zero_stages))
        if missing and not set(zero) & set(able.zero_stages):  # some left: the search keeps those
            raise InputError(f"--zero {' '.join(map(str, missing))} with --framework {framework}: "
                             f"{able.version} as placement prices it runs ZeRO stages "
                             f"{', '.join(map(str, able.zero_stages))}; give one of them, or drop --framework")
    cfg = SearchConfig(top_k=top_k,
                       recompute=tuple(Recompute(r) for r in recompute) or SearchConfig.recompute,
                       zero_stages=tuple(sorted(set(zero)))
                       or ((0, 1, 2, 3) if exhaustive
                           else default_zero_stages(CAPABILITIES[framework] if framework else None)),
                       prune_dominated=not exhaustive, recipe=recipe, choices=choices, module_sets=module_sets,
                       pipeline_policies=splits,
                       # Megatron-FSDP shards over the whole data-parallel group: no HSDP in its files
                       hsdp=not ("megatron" in launched or (framework and not CAPABILITIES[framework].hsdp)),
                       framework=able_for(framework, model, train, topo))
    sources = searched_sources(cfg, sources)  # the fields the search chooses say "searched", as a sweep row does
    real = slurm_topology is not None or cluster_graph is not None
    mapping = SolverConfig(time_limit_s=max(10.0, 5 * map_time_limit), deterministic_time_limit=map_time_limit) \
        if (do_map if do_map is not None else real) else None
    from tqdm import tqdm

    # bars on stderr, shown after 2 s and only on a terminal (disable=None): the layouts of an --exhaustive space
    # too big to price at once, then the plans mapped one by one
    with tqdm(desc="pricing layouts", unit="layout", unit_scale=True, file=sys.stderr, leave=False, disable=None,
              delay=2.0) as priced_bar, \
            tqdm(total=top_k, desc="mapping plans", unit="plan", file=sys.stderr, leave=False, disable=None,
                 delay=2.0) as bar:
        def priced(done: int, total: int) -> None:
            priced_bar.total = total
            priced_bar.update(done - priced_bar.n)

        try:
            planned = plan_job(model, train, topo, cfg, mapping, with_rank_table=as_json,  # only --json: the table
                               recipe_sources=sources, progress=bar.update, search_progress=priced,
                               model_sources=model_sources)
        except PlacementInfeasible as err:
            if as_json:  # a script reading stdout gets the contract's keys and why (a user check: stdout was empty)
                click.echo(json.dumps({"plans": [], "search": None, "infeasible": {"binding": err.binding,
                                                                                   "message": str(err)},
                                       "calibration": calibration_json(), "files_run": [], "files_over_capacity": [],
                                       "files_not_starting": [], "files_plan_index": None,
                                       "job_defaults": _job_defaults_json()}))
            raise
    if out_dir is not None:
        from pathlib import Path

        if plan_index > len(planned.plans):
            found = len(planned.plans)
            more = (f"raise --top-k to {plan_index} to keep that many" if found == top_k else
                    f"only {found} layouts fit this job; pick --plan-index 1..{found}")
            raise InputError(f"--plan-index {plan_index}: only {found} plans were found; {more}")
        files_run = _write_out(Path(out_dir), formats, planned.plans[plan_index - 1],
                               planned.gpu_of_rank[plan_index - 1], topo, given_model, train)
    else:
        files_run = []
    if not _timings():
        planned = without_timings(planned)
    _uncalibrated_step(model, train, planned.plans[0] if planned.plans else None, sources, model_sources, framework)
    from placement.html import plan_html

    written = plan_index if out_dir is not None else None
    fabric = fabric_priced(topo, click.get_current_context())
    # the page says what the text and stderr say of the job: its defaults, the search --emit narrowed, the network
    # priced, which plan the files realize and which of them run otherwise (a QA run: none of it was on the page)
    notes = [f"{field.replace('_', ' ')} {why}" for field, why in _job_defaults_json().items()] \
        + ([narrowed_note.removeprefix("placement: note: ")] if narrowed_note else [])
    _write_report(report, lambda: plan_html(
        planned, topo, _calibration_line(), setter=allocator_setter(formats, framework), fabric=fabric, notes=notes,
        files=None if written is None else {"folder": out_dir, "index": written, "run": files_run},
        bounds=planned.search.bounds if exhaustive else ()))
    _job_defaults_note()  # on stderr under --json too (a user trial found it only in the text output)
    if as_json:
        planned_json = plan_json(planned)
        levels = topo.describe()  # the same network as numbers (a user trial: `fabric` is one prose string)
        for p in planned_json["plans"]:  # each PLAN carries it as evaluate's does (a review: null beside the top's)
            p["fabric"] = fabric
            p["fabric_levels"] = levels
            p["job_defaults"] = _job_defaults_json()  # as evaluate's PLAN (a user check: null beside the top's)
        click.echo(json.dumps(planned_json | {"calibration": calibration_json(), "files_run": files_run,
                                              "fabric": fabric, "fabric_levels": levels,
                                              "files_over_capacity": _over_capacity(files_run),
                                              "files_not_starting": _not_starting(files_run),
                                              "files_plan_index": written, "job_defaults": _job_defaults_json()}))
    else:
        click.echo(plan_table(planned, exhaustive=exhaustive, setter=allocator_setter(formats, framework)))
        click.echo(f"\nfabric: {fabric}")
        if written is not None and written > 1:  # the lines above are plan 1's: a user trial read them as the files'
            from placement.report import single_plan_table

            click.echo(f"\nthe files in {out_dir} realize plan {written} of the table above, not plan 1:\n\n"
                       + single_plan_table(planned.plans[written - 1], allocator_setter(formats, framework)))
        if files_run:
            click.echo(f"\nthe files written run other than plan {plan_index} (each file's header says so too):\n"
                       + "\n".join(f"  {line}" for line in files_run))
        _echo_calibration()
    _fail_files(files_run, framework, "plan")


def _say_emit_narrows(formats: list[str], before, after, module_sets, splits_narrowed: bool) -> str | None:
    """Say on stderr where --emit (without --framework, which narrows nothing more) narrowed the search to what every
    named format launches as priced: the plan printed is then the best of fewer choices, and a plan for Megatron-Core
    alone may be faster (a user trial found 8-28 % slower plans behind an unchanged command line)."""
    from placement.search import SEARCHED_FIELDS

    if not formats:
        return None
    narrowed = [name for name, attr in SEARCHED_FIELDS.items()
                if len(getattr(after, attr)) < len(getattr(before, attr))]
    if module_sets == ():
        narrowed.append("selective recompute: no module list all of them launch")
    elif module_sets is not None:
        narrowed.append("recompute modules")
    if splits_narrowed:
        narrowed.append("pipeline split")
    if not narrowed:
        return None
    note = (f"placement: note: --emit {','.join(formats)}: the search kept only the recipe choices every named "
            f"format launches as priced ({', '.join(narrowed)} narrowed); the plan below is the best of those, a "
            f"plan for fewer formats (--emit megatron) may be faster, and a file that runs its layout or recipe "
            f"otherwise says so in its header (--framework F plans only what F runs as priced)")
    click.echo(note, err=True)
    return note


@main.command()
@job_options
@click.option("--tp", type=int, default=1, show_default=True)
@click.option("--cp", type=int, default=1, show_default=True)
@click.option("--ep", type=int, default=1, show_default=True)
@click.option("--etp", type=int, default=1, show_default=True)
@click.option("--pp", type=int, default=1, show_default=True)
@click.option("--vpp", type=int, default=1, show_default=True)
@click.option("--mbs", type=int, default=1, show_default=True, help="Micro-batch size.")
@click.option("--zero", type=click.IntRange(0, 3), default=1, show_default=True)
@click.option("--dp-shard", type=int, default=None, help="ZeRO-3 shard group (HSDP when < dp).")
@click.option("--recompute", type=click.Choice([r.value for r in Recompute]), default="none", show_default=True)
@click.option("--sequence-parallel/--no-sequence-parallel", default=None,
              help="Default: on when tp > 1.")
@click.option("--out", "out_dir", type=click.Path(), default=None,
              help="Write the layout's launch files (host order, SLURM hostfile, MPI rankfile, --emit formats) here; "
                   "ranks in the machine's order.")
@click.option("--emit", "emit_formats", multiple=True, help=EMIT_HELP)
@click.option("--framework", type=click.Choice(FRAMEWORK_CHOICES), default=None,
              help="Refuse a layout this framework does not run exactly as priced (see plan --framework).")
@recipe_options
@handle_errors
def evaluate(model_ref, cluster_ref, gpus, nodes, segment, seq_len, global_batch, precision, memory_headroom_gib,
             as_json, slurm_topology, nodelist, node_type, cluster_graph, oversubscription, node_topo, tp, cp, ep, etp,
             pp, vpp, mbs, zero, dp_shard, recompute, sequence_parallel, out_dir, emit_formats, framework,
             **recipe_args):
    """Estimate one given layout (dp is derived from the GPU count) under the recipe given (pinned: nothing
    is searched); exit 1 if it does not fit."""
    from placement.evaluate import evaluate_priced, launch_order, with_crossings
    from placement.report import allocator_setter, crossings_section, single_plan_table

    recipe, sources = build_recipe(*_recipe_flag_values(recipe_args))
    _modules_need_selective(recipe, (recompute,))
    formats = _check_out(out_dir, emit_formats, framework)

    model, train, topo = build_job(model_ref, cluster_ref, gpus, nodes, seq_len, global_batch, precision,
                                   slurm_topology, nodelist, node_type, cluster_graph, oversubscription, node_topo,
                                   segment, memory_headroom_gib)
    recipe, sources = model_recipe(model, recipe, sources, framework)
    recipe, sources = _framework_recipe(framework, recipe, sources, train.precision, model, topo)
    recipe, sources = _framework_selective(framework, recompute, recipe, sources)
    given_model = model  # the files' own model code (DeepSpeed, a device mesh) runs it as given
    model, model_sources = model_as_run(framework, model, f"--framework {framework}")
    _check_recompute_num_layers(recipe, sources, (recompute,), model, pp, vpp)
    _check_moe_recipe(recipe, sources, model)
    _check_fp8_recipe(recipe, sources, train.precision)
    per_replica = tp * cp * pp
    for name, value in (("--tp", tp), ("--cp", cp), ("--ep", ep), ("--etp", etp), ("--pp", pp), ("--vpp", vpp),
                        ("--mbs", mbs)):
        _positive(name, value)
    if topo.num_gpus % per_replica:
        raise InputError(
            f"tp ({tp}) * cp ({cp}) * pp ({pp}) = {per_replica} does not divide the {topo.num_gpus} GPUs; "
            f"dp = GPUs / (tp * cp * pp) must be whole; {_replica_fix(topo.num_gpus, tp, cp, pp)}"
        )
    sp = tp > 1 if sequence_parallel is None else sequence_parallel
    layout = Layout(tp=tp, cp=cp, ep=ep, etp=etp, pp=pp, vpp=vpp, dp=topo.num_gpus // per_replica,
                    micro_batch_size=mbs, zero_stage=zero, dp_shard=dp_shard, recompute=Recompute(recompute),
                    sequence_parallel=sp)
    if framework is not None:
        from placement.cost.batch import LayoutBatch

        check_precision(framework, model, train.precision.value, topo.accelerator)
        check_seq_len(framework, model, train.seq_len, train.precision.value, topo.accelerator)
        able = able_for(framework, model, train, topo)
        able.check(LayoutBatch.from_layouts([layout], recipe), model.num_layers, model.kv_heads, train.seq_len)
        able.check_precision_layout(LayoutBatch.from_layouts([layout], recipe), train.precision.value,
                                    train.global_batch)
    result, est = evaluate_priced(model, train, topo, layout, recipe, sources, model_sources,
                                  runs_te=framework in (None, "megatron"), torch_pipeline=framework == "torchtitan")
    # allocation order; with measured intra-node links each TP group on the GPUs the price assumed, which the
    # files realize with CUDA_VISIBLE_DEVICES (as `plan` writes them)
    result, gpu_of_rank = launch_order(result, model, topo, layout, with_rank_table=as_json)
    result = with_crossings(result, est, topo, layout, gpu_of_rank)
    fabric = fabric_priced(topo, click.get_current_context())
    if out_dir is not None:
        from pathlib import Path

        files_run = _write_out(Path(out_dir), formats, result, gpu_of_rank, topo, given_model, train)
    else:
        files_run = []
    _job_defaults_note()  # on stderr under --json too
    if as_json:
        # files_run only where files were written: without --out the JSON stays one Plan (and its calibration)
        result = result.model_copy(update={"job_defaults": _job_defaults_json(), "fabric": fabric,
                                           "fabric_levels": topo.describe()})
        click.echo(json.dumps(result.model_dump(mode="json") | {"calibration": calibration_json()}
                              | ({"files_run": files_run, "files_over_capacity": _over_capacity(files_run),
                                  "files_not_starting": _not_starting(files_run)} if out_dir is not None else {})))
    else:
        click.echo(single_plan_table(result, allocator_setter(formats, framework)))
        measured = ", TP groups on their measured links" if topo.node_topo_source else ""
        click.echo(f"\nwhere the groups sit (allocation order{measured}):\n{crossings_section(result)}\n"
                   f"fabric: {fabric}")
        if files_run:
            click.echo("\nthe files written run other than this plan (each file's header says so too):\n"
                       + "\n".join(f"  {line}" for line in files_run))
        _echo_calibration()
    if not result.fits:
        # the exit names the binding constraint and a fix, as plan's does (a user trial: exit 1 with nothing on stderr,
        # and the files written for the layout without a word)
        from placement.cost.constants import GiB
        from placement.search import other_memory_text

        m = result.memory
        # a file that runs otherwise (files_run) gives its own memory in its header (a review: an HSDP layout's
        # DeepSpeed file runs ZeRO-3 over all its ranks, 30.6 GiB, and fits)
        other = [line.split(":", 1)[0] for line in files_run]
        written = (f"; the files written in {out_dir} run it, so they run out of memory too"
                   + (f", but for {', '.join(other)}, whose header gives what it runs" if other else "")
                   if out_dir else "")
        click.echo(f"placement: infeasible (memory): this layout needs {result.peak_memory_bytes / GiB:.1f} GiB per "
                   f"GPU (weights {m.weights_bytes / GiB:.1f}, gradients {m.grads_bytes / GiB:.1f}, optimizer "
                   f"{m.optimizer_bytes / GiB:.1f}, activations {m.activations_bytes / GiB:.1f}, "
                   f"{other_memory_text(m.other_bytes, m.logits_bytes, 'logits, reserve and buffers')}), capacity "
                   f"{result.memory_capacity_bytes / GiB:.1f} "
                   f"GiB{written}; try {infeasible_fixes(result, _zero3_peak(model, train, topo, layout, recipe))}",
                   err=True)
        sys.exit(EXIT_INFEASIBLE)
    _fail_files(files_run, framework, "evaluate")


def _zero3_peak(model, train, topo, layout: Layout, recipe) -> float | None:
    """The layout's peak at ZeRO-3 over all its data-parallel ranks, for the --zero advice (a user trial: a Mixtral
    layout at ep 8 on 16 GPUs was told its 59.6 GiB of state were "shardable over 16 ranks", where its experts, most
    of it, shard over their 2 expert-data-parallel ranks); None where that layout is not one (nothing to shard)."""
    from placement.evaluate import evaluate_layout

    if layout.zero_stage == 3 or layout.dp * layout.cp == 1:
        return None
    try:
        return evaluate_layout(model, train, topo, layout.model_copy(update={"zero_stage": 3, "dp_shard": None}),
                               recipe).peak_memory_bytes
    except (InputError, PlacementInfeasible, ValueError):  # a layout the checks refuse at ZeRO-3: no advice
        return None


def infeasible_fixes(p, zero3_peak_bytes: float | None = None) -> str:
    """The fixes `evaluate` still has for a layout over capacity, each only where it is left (a user trial: a layout at
    full recompute, ZeRO-3, micro-batch 1 and dp 1 was told to try a heavier --recompute or --zero and a smaller
    --mbs), with what the state and the activations weigh."""
    from placement.cost.constants import GiB

    lay, m = p.layout, p.memory
    state = m.weights_bytes + m.grads_bytes + m.optimizer_bytes
    fixes = []
    if lay.recompute != "full" and m.activations_bytes > 0.0:
        fixes.append(f"a heavier --recompute (activations {m.activations_bytes / GiB:.1f} GiB)")
    if lay.micro_batch_size > 1:
        fixes.append(f"a smaller --mbs (now {lay.micro_batch_size})")
    if zero3_peak_bytes is not None:
        # priced, not divided: experts shard over their expert-data-parallel ranks only, and ZeRO-3 adds its buffers
        fixes.append(f"a higher --zero (now {lay.zero_stage}; weights, gradients and optimizer state {state / GiB:.1f} "
                     f"GiB; at --zero 3 the layout needs {zero3_peak_bytes / GiB:.1f} GiB"
                     + ("" if zero3_peak_bytes <= p.memory_capacity_bytes else ", still over capacity") + ")")
    recipe = p.recipe_spec()
    if not recipe.optimizer_state_bf16 and m.optimizer_bytes > 0.0:
        # a user trial's Nemotron-4 340B run (its config: optim.dtype bf16) was refused with no word of this fix;
        # the moments' share of the optimizer row: all of it where no float32 master copy is in the row
        master = recipe.optimizer_master_weights and not recipe.fp32_weights
        moments = 8.0 / 12.0 if master else 1.0
        fixes.append(f"--optimizer-state-bf16 if the job keeps Adam's moments in bf16 (optimizer state "
                     f"{m.optimizer_bytes / GiB:.1f} GiB, {m.optimizer_bytes * moments / 2 / GiB:.1f} less)")
    logits = m.logits_bytes or 0.0
    if logits > max(m.activations_bytes, state):
        # the loss's logits are tokens per rank x vocabulary / tp, all on the last stage: more --pp does not split
        # them (a user trial at 1M tokens was told to try more --pp, which left the 95.9 GiB where it was)
        fixes.append(f"more --tp or --cp (now tp {lay.tp}, cp {lay.cp}: the loss's logits, {logits / GiB:.1f} GiB, "
                     f"are the rank's tokens x the vocabulary / tp, all on the last pipeline stage, so more --pp "
                     f"leaves them)"
                     + (", --cross-entropy-fusion" if not recipe.cross_entropy_fusion else "")
                     + " (more GPUs only through a larger --tp or --cp)")
    else:
        fixes.append(f"more --tp/--pp (now tp {lay.tp}, pp {lay.pp}) or more GPUs")
    offload = ""
    if m.activations_bytes > 0.5 * p.peak_memory_bytes:
        # a user trial: Megatron-Bridge's GB200 Llama 3 70B recipe runs this over capacity by moving 40 layers'
        # activations to host memory (scripts/performance/utils/overrides.py _set_recompute_overrides,
        # model.cpu_offloading_num_layers), which placement does not price
        offload = (f"; activation offloading to host memory (Megatron-Core's cpu_offloading_num_layers, "
                   f"Megatron-Bridge's activation_offload_layers) is not priced: a job that offloads some of the "
                   f"{m.activations_bytes / GiB:.1f} GiB of activations can run at a layout this estimate puts over "
                   f"capacity, at a step cost placement does not give")
    return ", ".join(fixes) + ", or `placement plan` with the same job for the layouts that fit" + offload


@main.group()
def show() -> None:
    """Describe catalog entries."""


@show.command("model")
@click.argument("ref")
@click.option("--seq-len", type=int, default=None)
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def show_model(ref, seq_len, as_json):
    """Parameters, FLOPs per token and bytes per parameter of a model."""
    from placement.report import model_facts, model_table

    model: ModelSpec = load_model(ref)
    _positive("--seq-len", seq_len)
    facts = model_facts(model, seq_len or model.default_seq_len)
    click.echo(json.dumps(facts) if as_json else model_table(facts))


@show.command("cluster")
@click.argument("ref")
@click.option("--gpus", type=int, default=None)
@click.option("--nodes", type=int, default=None)
@click.option("--segment", type=int, default=None,
              help="SLURM --segment of the job (0 = no segment, racks filled whole).")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def show_cluster(ref, gpus, nodes, segment, as_json):
    """Levels, bandwidths and latencies of a cluster design at a size."""
    from placement.report import cluster_facts, cluster_table

    cluster = load_cluster(ref)
    topo = Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=gpus, num_nodes=nodes,
                    segment_nodes=segment)
    facts = cluster_facts(topo)
    click.echo(json.dumps(facts) if as_json else cluster_table(facts))


@show.command("models")
def show_models():
    """List the model catalog."""
    click.echo("\n".join(model_names()))


@show.command("clusters")
def show_clusters():
    """List the cluster catalog."""
    click.echo("\n".join(cluster_names()))


@show.command("accelerators")
def show_accelerators():
    """List the accelerator catalog."""
    click.echo("\n".join(accelerator_names()))


@main.command()
@click.argument("sweep_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "out_dir", type=click.Path(), required=True,
              help="Directory for sweep.csv, sweep.json, frontier.png, breakdown.png and the cache.")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="local: a process pool on this machine; ray: tasks on a Ray cluster (RAY_ADDRESS) or a local one.")
@click.option("--workers", type=click.IntRange(1, 1024), default=None, help="Parallel workers (default: CPUs).")
@click.option("--no-cache", is_flag=True, help="Recompute every cell.")
@click.option("--json", "as_json", is_flag=True, help="Print the sweep.json document on stdout.")
@click.option("--no-plots", is_flag=True, help="Skip frontier.png and breakdown.png (a quick what-if).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a field of the sweep file (repeatable): a study field (budget, objective, "
                   "deadline_days), a design or workload field for all (energy_price_per_kwh=0.15, tokens=2e13), "
                   "or designs.NAME.KEY / workloads.NAME.KEY for one. Prices re-apply to cached plans.")
@click.option("--report", "report_file", default=None,
              help=REPORT_HELP.format(what="the study's assumptions, the table, the frontier with error bars and "
                                           "GPU counts, the step breakdown"))
@CALIBRATION_OPTION
@handle_errors
def sweep(sweep_file, out_dir, executor, workers, no_cache, as_json, no_plots, sets, report_file):
    """Plan every design x workload of a purchase study; cost, time-to-train and Pareto frontier."""
    from datetime import UTC, datetime
    from pathlib import Path

    from tqdm import tqdm

    from placement.catalog import catalog_root
    from placement.loaders.files import parse_yaml, read_text, yaml_kind
    from placement.loaders.kinds import wrong_kind
    from placement.outfiles import check_out_dir
    from placement.sweep.output import plan_commands, study_document, summary, write_plots, write_tables
    from placement.sweep.overrides import apply_sets
    from placement.sweep.run import CellsLost, cells, run_sweep
    from placement.sweep.spec import SweepSpec

    path = Path(sweep_file)
    data = parse_yaml(read_text(path, "sweep file", "give a readable UTF-8 YAML sweep file"), path, "sweep file")
    other = wrong_kind(path, data, "sweep")  # a model, cluster, accelerator, profile or step file as the sweep file
    if other is not None:
        raise InputError(other)
    if not isinstance(data, dict):
        raise InputError(f"{path}: a sweep file must be a YAML mapping of fields, got {yaml_kind(data)}; "
                         f"see the files in {catalog_root() / 'hardware' / 'sweeps'} for examples")
    where = f"{path} with --set {' --set '.join(sets)}" if sets else str(path)
    try:
        spec = SweepSpec.model_validate(apply_sets(data, sets))
    except ValidationError as err:
        raise InputError(format_validation_error(err, where)) from None
    spec = _paths_from_sweep_file(spec, path)
    if spec.top_k != 1:  # a QA trial: `top_k: 5` was taken and nothing said it went unused
        click.echo(f"placement: warning: {where}: top_k {spec.top_k} is accepted for compatibility and not used: a "
                   f"sweep keeps the best plan of each GPU count; a row's `command` with --top-k {spec.top_k} lists "
                   f"that many layouts of its count", err=True)
    out = check_out_dir(out_dir, ["sweep.csv", "sweep.json", "frontier.png", "breakdown.png"])
    report = _check_report(report_file)
    calibration_path, profile = _calibration()
    fitted = profile.fitted() if profile is not None else None
    try:
        todo = cells(spec, fitted, profile.accelerator if profile else None)  # every design and model resolved
    except InputError as err:  # a value a --set gave is named as the --set's (a user trial: blamed on the file)
        raise InputError(f"{where}: {err}") from None
    if profile is not None and not any(c.accelerator.name == profile.accelerator for c in todo):
        raise InputError(f"--calibration {calibration_path}: fitted on {profile.accelerator}, but no design of "
                         f"{sweep_file} uses it; calibrate on a design's cluster or drop --calibration")
    if profile is not None:
        _design_warnings(profile, [c.cluster for c in todo if c.accelerator.name == profile.accelerator])
    total = len(todo)
    cache = None if no_cache else out / "cache"
    try:  # SIGTERM stops like Ctrl-C (handle_errors): finished cells stay cached
        with tqdm(total=total, desc=f"sweep {spec.name}", unit="cell", file=sys.stderr, leave=False,
                  disable=None) as bar:
            result = run_sweep(spec, cache, executor, workers, progress=bar.update, todo=todo)
    except Exception as err:
        if not _SIGNALLED and not isinstance(err, CellsLost):
            raise
        # a SIGTERM's KeyboardInterrupt can surface as another exception (see _SIGNALLED): the stop still stops
        _sweep_stopped(err, todo, total, cache)
    except KeyboardInterrupt as err:
        _sweep_stopped(err, todo, total, cache)
    date = datetime.now(UTC).isoformat(timespec="seconds") if _timings() else None  # --reproducible: None
    clusters = plan_commands(out, result.rows, todo, (str(calibration_path), profile.accelerator)
                             if profile is not None else None)
    document = study_document(spec, result, tuple(sets), date, calibration_json())
    written = clusters + write_tables(out, result.rows, document)
    if not no_plots:
        written += write_plots(out, result.rows, spec.currency, spec.budget)
    for names, kind, what in ((result.bad_cache, "unreadable ", "recomputed"),
                              (result.unwritable_cache, "", "could not be written, the next run computes them again")):
        if names:
            click.echo(f"sweep cache {out / 'cache'}: {len(names)} {kind}entr{'y' if len(names) == 1 else 'ies'} "
                       f"{what} ({', '.join(names)})", err=True)
    click.echo(f"{total} cells: computed {result.computed}, from cache {result.cached}; plans computed "
               f"{result.plans_computed}, from cache {result.plans_cached}; wrote "
               + ", ".join(str(p) for p in written), err=True)
    from placement.html import sweep_html
    from placement.sweep.output import page_meta

    # the page shows the study document (inputs, assumptions, bands, date) that sweep.json holds, in words
    _write_report(report, lambda: sweep_html(result.rows, page_meta(document, _calibration_line())))
    if as_json:
        click.echo(json.dumps(document))
    else:
        click.echo(summary(result.rows, spec.currency, spec, document["network_sources"]))
        _echo_calibration()
    if not any(r["status"] == "ok" for r in result.rows):
        _fail(EXIT_INFEASIBLE, f"sweep {spec.name}: no cell has a plan (every design x workload is infeasible; "
                               f"each row's message says why); the files above are written")


def _replica_fix(num_gpus: int, tp: int, cp: int, pp: int) -> str:
    """The nearest tp below the one given whose tp x cp x pp divides the GPUs, or the rule to pick one."""
    rest = cp * pp
    if num_gpus % rest == 0:
        smaller = next((t for t in range(min(tp, num_gpus // rest), 0, -1) if (num_gpus // rest) % t == 0), 1)
        return f"try --tp {smaller}"
    return f"pick tp, cp and pp whose product divides {num_gpus}"


def _sweep_stopped(err: BaseException, todo, total: int, cache) -> None:
    """A sweep stopped (a signal) or short of workers (CellsLost): what is cached, and the exit code."""
    from placement.sweep.run import CellsLost

    kept = {c.fingerprint for c in todo} & {p.stem for p in cache.glob("*.json")} if cache else set()
    where = (f"{len(kept)} of {total} cells are done and cached in {cache}; run the same command again to "
             f"compute the rest" if cache else "nothing is kept (--no-cache)")
    if isinstance(err, CellsLost):
        click.echo(f"placement: sweep incomplete: {err}; {where} (exit {EXIT_CELLS_LOST})", err=True)
        sys.exit(EXIT_CELLS_LOST)
    click.echo(f"placement: sweep interrupted: {where} (exit {EXIT_INTERRUPTED})", err=True)
    sys.exit(EXIT_INTERRUPTED)


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A name bash takes as an environment variable it imports (bash(1) DEFINITIONS: name)."""


def _environment_flags(given: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """`audit --env NAME=VALUE` flags as (NAME, VALUE) pairs in order; an InputError for a malformed one (no `=`, a
    NAME bash would not import as a variable) or a NAME given twice."""
    out: dict[str, str] = {}
    for flag in given:
        name, eq, value = flag.partition("=")
        if not eq or not _ENV_NAME.fullmatch(name):
            why = ("has no `=`" if not eq else
                   f"its name {name!r} is not a shell variable name (letters, digits and _, not starting with a "
                   f"digit), which bash would not import from the environment")
            raise InputError(f"--env {flag!r}: {why}; give each variable of the job's environment as "
                             f"--env NAME=VALUE (e.g. --env GPU_TYPE=h100; an empty value is --env NAME=)")
        if name in out and out[name] != value:
            raise InputError(f"--env {name}: given twice ({name}={out[name]} and {name}={value}); the job's "
                             f"environment holds one value, give that one")
        out[name] = value
    return tuple(out.items())


def _files_text(paths) -> str:
    """The launch files' text, which the audit's argument diff checks its launched side against."""
    return "\n".join(Path(p).read_text(errors="replace") for p in paths if Path(p).is_file())


@main.command()
@job_options
@click.option("--launch", "launch_files", type=click.Path(dir_okay=False), multiple=True, required=True,
              help="The job's launch material, unedited (repeatable): a Megatron-LM script or argument list, "
                   "torchtitan flags or TOML, a DeepSpeed JSON and hostfile.")
@click.option("--hosts", "hosts_file", type=click.Path(dir_okay=False), default=None,
              help="The host order the job ran with, node rank 0 first: one host per line, or placement's "
                   "hosts.txt, an Open MPI rankfile, a DeepSpeed/MPI hostfile, a SLURM arbitrary-distribution "
                   "hostfile.")
@click.option("--slurm-conf", "slurm_conf", type=click.Path(dir_okay=False), default=None,
              help="The cluster's slurm.conf (with --slurm-topology): its TopologyParam=SwitchAsNodeRank or "
                   "BlockAsNodeRank numbers a job's nodes leaf by leaf (block by block), the order node ranks from "
                   "SLURM (srun, $SLURM_NODEID) run in. Default: by name, as SLURM does without it.")
@click.option("--framework", type=click.Choice(FRAMEWORK_CHOICES), default=None,
              help="Default: detected from the launch files.")
@click.option("--script-args", "script_args", default="",
              help="The arguments the launch script was started with, as one string: its $1 ... (e.g. "
                   "'deepspeed' for `sbatch launch.sbatch deepspeed`). Default: none.")
@click.option("--env", "script_env", multiple=True, metavar="NAME=VALUE",
              help="A variable of the job's environment when the launch script starts (repeatable), as bash "
                   "would see it: `--env GPU_TYPE=h100 --env JOB_TOTAL_GPUS=512`. Default: a clean environment.")
@click.option("--fail-on", type=click.Choice(["info", "warning", "error"]), default="error", show_default=True,
              help="Exit 1 when a finding of this severity or above exists (for CI gates).")
@click.option("--map-time-limit", type=_SECONDS, default=1.0, show_default=True,
              help="CP-SAT deterministic time for the audit's plans on a real allocation, shared by the candidates "
                   "that need a solve.")
@click.option("--out", "out_dir", type=click.Path(), default=None,
              help="Write the best plan's launch files (host order, hostfiles, the framework's config) here.")
@click.option("--report", "report_file", default=None,
              help=REPORT_HELP.format(what="the job as launched and the best plan on the topology, their step and "
                                           "memory, the findings with their cost, the argument diff"))
@recipe_options
@handle_errors
def audit(model_ref, cluster_ref, gpus, nodes, segment, seq_len, global_batch, precision, memory_headroom_gib,
          as_json, slurm_topology, nodelist, node_type, cluster_graph, oversubscription, node_topo, launch_files,
          hosts_file, slurm_conf, framework, script_args, script_env, fail_on, map_time_limit, out_dir, report_file,
          **recipe_args):
    """Read a running job's launch files; price its layout where it lands; list what it costs and the fix.

    The recipe is what the launch files state (Megatron's recipe arguments); --recipe FILE and the recipe
    flags add what they leave unsaid (routing imbalance, say) and override what they state."""
    from pathlib import Path

    from placement.audit.core import SEVERITIES, audit_job, files_global_batch, read_host_order
    from placement.audit.launch import parse_launch, refuse_unrunnable
    from placement.audit.report import audit_json, audit_table, write_best
    from placement.mapping.config import SolverConfig

    recipe_file, given = _recipe_flag_values(recipe_args)
    report = _check_report(report_file)
    import shlex

    try:
        args = tuple(shlex.split(script_args))
    except ValueError as err:
        raise InputError(f"--script-args {script_args!r}: {err}; give the arguments as a shell would split them") \
            from None
    launch = refuse_unrunnable(parse_launch([Path(p) for p in launch_files], framework, args,
                                            _environment_flags(script_env)))
    if out_dir is not None:  # before any work
        from placement.audit.report import FRAMEWORK_FORMAT, JOB_HOSTS
        from placement.emit.writer import output_names
        from placement.mapping.report import LAUNCH_FILES
        from placement.outfiles import check_out_dir

        emitted = [f for f in [FRAMEWORK_FORMAT.get(launch.framework)] if f]
        names = [*LAUNCH_FILES, JOB_HOSTS, *output_names(emitted)]
        out = check_out_dir(out_dir, names)
        # a written file must not replace one of the job's own (a review: `--out` in the job's folder overwrote its
        # DeepSpeed JSON or hostfile with the best plan's)
        from placement.audit.report import OWN_JSON, own_program

        if own_program(launch):  # its own program's files: the hosts, a DeepSpeed hostfile and its JSON or config
            names = [*LAUNCH_FILES, JOB_HOSTS, "hostfile", OWN_JSON, *(Path(p).name for p in launch.neox_configs)]
        inputs = [*launch_files, hosts_file, recipe_file, slurm_topology, cluster_graph, node_topo]
        own_files = {Path(p).resolve(): p for p in inputs if p is not None}
        # the folder resolved, not the file: a written file replaces a symlink there, never its target
        clash = next((own_files[out.resolve() / n] for n in names if out.resolve() / n in own_files), None)
        if clash is not None:
            raise InputError(f"--out {out_dir}: the audit would write over the job's own {clash} (its best plan's "
                             f"files are named {', '.join(names)}); give --out another folder")
    ctx = click.get_current_context()
    if ctx.get_parameter_source("precision") == click.core.ParameterSource.DEFAULT:
        precision = launch.precision or precision
    elif launch.precision is not None and launch.precision != precision:
        # the files' precision is what runs (a user trial: --precision fp8 priced bf16 files 25-30 % fast, under a
        # source line that still said bf16)
        raise InputError(f"--precision {precision} but the launch files train in {launch.precision} "
                         f"({launch.sources.get('precision', 'their framework default')}); the audit prices what the "
                         f"files run: drop --precision, or change the files (what the job would gain in "
                         f"{precision}: `placement evaluate --precision {precision}` with its layout)")
    from placement.audit.shell import environment_may_set

    defaulted = environment_may_set(launch.sources.get("seq_len", ""))
    if seq_len is not None and launch.seq_len is not None and seq_len != launch.seq_len and defaulted:
        # the files' value is a ${SEQ:-N} default the job's environment may set: the flag is that setting (a review)
        launch = launch.model_copy(update={"seq_len": seq_len, "sources": {**launch.sources, "seq_len": (
            f"--seq-len {seq_len}, over the files' default {launch.seq_len} ({launch.sources['seq_len']})")}})
    elif seq_len is not None and launch.seq_len is not None and seq_len != launch.seq_len:
        raise InputError(f"--seq-len {seq_len} but the launch files train sequences of {launch.seq_len} "
                         f"({launch.sources.get('seq_len', 'the files')}); the audit prices what the files run: drop "
                         f"the flag or change the files")
    real = slurm_topology is not None or cluster_graph is not None
    launch, nodelist = _header_nodelist(launch, slurm_topology, nodelist)
    if not real and gpus is None and nodes is None and launch.world_size is not None:
        gpus = launch.world_size
    elif not real and gpus is None and nodes is None and launch.launcher_nodes is not None:
        nodes = launch.launcher_nodes  # torchrun --nproc-per-node gpu: the files' nodes, each with all its GPUs
    used = _gpus_used_per_node(launch, cluster_ref, real)
    model, train, topo = build_job(model_ref, cluster_ref, gpus, nodes, seq_len or launch.seq_len,
                                   global_batch or launch.global_batch, precision, slurm_topology, nodelist,
                                   node_type, cluster_graph, oversubscription, node_topo, segment, memory_headroom_gib,
                                   used)
    hosts = read_host_order(Path(hosts_file)) if hosts_file else None
    _slurm_node_ranking(topo, slurm_conf, slurm_topology)
    if real:
        _check_per_host(launch, topo)
        _check_world_size(launch, topo, nodelist, cluster_graph, (hosts_file, hosts) if hosts else None)
    _check_elastic_range(launch, topo, nodelist if real else None, gpus, nodes)
    fixed = files_global_batch(launch, topo.num_gpus)  # the files' own batch wins over the catalog default
    if fixed is not None and fixed[0] != train.global_batch:
        if global_batch is not None:
            raise InputError(f"--global-batch {global_batch} but the launch files train {fixed[0]} sequences per step "
                             f"on {topo.num_gpus} GPUs ({fixed[1]}); drop the flag or fix the files")
        train = train.model_copy(update={"global_batch": fixed[0]})
    if fixed is not None and "global_batch" not in launch.sources:
        launch = launch.model_copy(update={"sources": {**launch.sources, "global_batch": fixed[1]}})
    job_sources = _job_sources(launch, ctx, topo, train, model, real)
    if used is not None:
        node = load_cluster(cluster_ref).gpus_per_node
        launch = launch.model_copy(update={"sources": {**launch.sources, "gpus_per_node": (
            f"{launch.sources['gpus_per_node']} (audited as the job runs: {used} of each {cluster_ref} node's {node} "
            f"GPUs, {topo.num_gpus // used} hosts; each GPU keeps the cluster's per-GPU NIC share, "
            f"nic_bandwidth_bytes_per_s: where a node has fewer NICs than GPUs the used GPUs may get more, which a "
            f"cluster file of {used}-GPU nodes prices)")}})
    launch = launch.model_copy(update={"sources": {**job_sources, **launch.sources}})
    mapping = SolverConfig(time_limit_s=max(10.0, 5 * map_time_limit), deterministic_time_limit=map_time_limit) \
        if real else None
    overrides = build_recipe(recipe_file, given) if recipe_file is not None or given else None
    files_text = _files_text(launch_files)  # the argument diff's, read once
    from tqdm import tqdm

    # the best plans are mapped one by one: a bar after 2 s, only on a terminal (disable=None)
    with tqdm(total=5, desc="audit: planning the same job", unit="plan", file=sys.stderr, leave=False,
              disable=None, delay=2.0) as bar:
        result = audit_job(launch, model, train, topo, hosts, mapping, recipe_overrides=overrides,
                           progress=bar.update, files_text=files_text)
    if not _timings():
        result = result.without_timings()
    from placement.audit.measured import logged_step

    # a Megatron-LM log's iteration times beside the estimate (the launch files' first log that has them)
    measured = logged_step([Path(p) for p in launch_files], train.global_batch, result.estimate.step_time_s)
    if measured is not None:
        import dataclasses

        result = dataclasses.replace(result, measured=measured)
    files_run: list[str] = []
    not_carried: list[str] = []
    values_changed: list[dict] = []
    not_written: list[dict] = []  # changes the --out files do not carry: the job's own command takes them
    if out_dir is not None:
        paths, files_run = write_best(result, train, topo, Path(out_dir))
        for path in paths:
            click.echo(f"wrote {path}", err=True)
        written = Path(out_dir) / "megatron.sh"
        if written in paths:
            from placement.audit.changes import megatron_flags_not_carried, megatron_values_changed

            ours = written.read_text()
            not_carried = megatron_flags_not_carried(result.launch.command_args, ours, result.changes)
            values_changed = megatron_values_changed(result.launch.command_args, ours, result.changes)
            if not_carried:
                click.echo(f"placement: warning: {written} does not carry these arguments of the job's files (the "
                           f"change list does not remove them; add those the job needs, such as its data, "
                           f"tokenizer, optimizer and model numerics): {' '.join(not_carried)}", err=True)
            if values_changed:
                click.echo(f"placement: warning: {written} gives these arguments other values than the job's files, "
                           f"which the change list does not name (set the job's where it needs them): "
                           + "; ".join(f"{c['argument']} {c['written']} (the job's: {c['job']})"
                                       for c in values_changed), err=True)
        from placement.audit.report import command_changes, own_program, own_program_note

        if own_program(result.launch):
            not_written = command_changes(result)
            click.echo(f"placement: note: {own_program_note(result, train, topo, Path(out_dir), not_written)}",
                       err=True)
        from placement.audit.core import stays_on_megatron_deepspeed

        if stays_on_megatron_deepspeed(result.launch, result.model):
            not_written = list(result.changes)
            click.echo("placement: note: no megatron.sh: the best plan stays on Megatron-DeepSpeed (see the changes "
                       "note); apply the listed changes to the job's own script", err=True)
    from placement.html import audit_html

    # after the files: the page says which of them run other than the best plan, as the text does (a QA run)
    _write_report(report, lambda: audit_html(result, topo, _calibration_line(), files=None if out_dir is None else
                                             {"folder": out_dir, "run": files_run}))
    if as_json:
        click.echo(json.dumps(audit_json(result) | {"calibration": calibration_json()}
                              | ({"files_run": files_run, "files_over_capacity": _over_capacity(files_run),
                                  "files_not_starting": _not_starting(files_run), "arguments_not_carried": not_carried,
                                  "arguments_changed": values_changed, "changes_not_written": not_written}
                                 if out_dir is not None else {})))
    else:
        click.echo(audit_table(result))
        if files_run:  # a review: an audit's file that ran other than its best plan said so only in its header
            click.echo("\nthe files written run other than the best plan (each file's header says so too):\n"
                       + "\n".join(f"  {line}" for line in files_run))
        _echo_calibration()
    _fail_files(files_run, result.launch.framework, "audit")
    threshold = SEVERITIES.index(fail_on)
    if any(SEVERITIES.index(f.severity) >= threshold for f in result.findings):
        sys.exit(EXIT_FINDINGS)


def able_for(framework: str | None, model, train, topo):
    """The framework's capability for `model` whose files name its run_config at `train`'s precision on `topo`
    (Capability.for_model: a config whose files refuse context parallelism runs cp 1); None without a framework."""
    if framework is None:
        return None
    return CAPABILITIES[framework].for_model(model.is_moe, model.tied_embeddings,
                                             run_config(framework, model, train.precision.value, topo.accelerator))


def _framework_recipe(framework, recipe, sources: dict[str, str], precision, model, topo):
    """The recipe with what `framework` always runs at `precision` (its capability rows, and those of the torchtitan
    config its files name for `model` on `topo`'s accelerator: frameworks.recipe_rows; what its launcher would run
    on several hosts, placement's files state themselves); a flag that asks for something else is refused, naming
    both."""
    if framework is None:
        return recipe, sources
    from placement.frameworks import CAPABILITIES, recipe_rows, run_config

    sources = dict(sources)
    config = run_config(framework, model, precision.value, topo.accelerator)
    choices = CAPABILITIES[framework].recipe_choices
    for field, value, why in recipe_rows(framework, False, precision, config, model.is_moe):
        if field in choices and sources.get(field, "default") != "default":
            continue  # the files write the value asked for (a QA run: MaxText's --no-optimizer-over-replicas refused)
        if field in sources and getattr(recipe, field) != value:
            asked = getattr(recipe, field)
            given = (" ".join(recipe_args({field: asked}))
                     if sources[field] == "flag" else f"{field} from {sources[field].removeprefix('file:')}")
            raise InputError(f"--framework {framework} always runs {field} = {value} ({why}); drop {given} or "
                             f"--framework")
        recipe = recipe.model_copy(update={field: value})
        sources[field] = f"--framework {framework}: {why}"
    from placement.emit.common import RECIPE_SUPPORT
    from placement.search import SEARCHED_FIELDS

    # a recipe feature the user pinned that the framework's files cannot launch (torchtitan's async TP is not what
    # --tp-comm-overlap prices): refused, as the capability rows above, rather than priced and then re-priced in the
    # file's header (a user trial: `evaluate --framework torchtitan --tp-comm-overlap` priced the overlap silently)
    support = RECIPE_SUPPORT.get(framework, {})
    for field in SEARCHED_FIELDS:
        runs = support.get(field)
        if runs and field in sources and sources[field] != "default" and getattr(recipe, field) not in runs:
            shown = " or ".join(str(getattr(v, "value", v)) for v in runs)
            given = (" ".join(recipe_args({field: getattr(recipe, field)}))
                     if sources[field] == "flag" else f"{field} from {sources[field].removeprefix('file:')}")
            raise InputError(f"--framework {framework}: its files launch {field} = {shown} only, so a plan priced "
                             f"with {getattr(getattr(recipe, field), 'value', getattr(recipe, field))} is not what "
                             f"they run; drop {given} or --framework")
    return _framework_modules(framework, recipe, sources)


PER_OP_FRAMEWORK = ("its activation-checkpoint:selective is its per-op policy, recompute module per_op "
                    "(torchtitan 0.3.0 distributed/activation_checkpoint.py SelectiveAC)")
"""Why `--framework torchtitan` prices selective recompute as per_op."""


def _framework_selective(framework: str | None, recompute: str, recipe, sources: dict[str, str]):
    """`evaluate`'s selective recompute as `framework` runs it where no module list is given: torchtitan's per-op
    policy (a layout without recompute keeps none: a named module list would read as selective)."""
    if framework == "torchtitan" and recompute == Recompute.SELECTIVE.value and not recipe.recompute_modules:
        recipe = recipe.model_copy(update={"recompute_modules": ("per_op",)})
        sources = {**sources, "recompute_modules": f"--framework torchtitan: {PER_OP_FRAMEWORK}"}
    return recipe, sources


def _framework_modules(framework: str, recipe, sources: dict[str, str]):
    """Selective recompute as `framework` runs it: torchtitan's is its per-op policy, so another module list is
    refused, naming both (`plan` searches per_op alone for it, emit.common.RECIPE_SUPPORT; `evaluate` prices its
    selective so, _framework_selective); Megatron-LM and MaxText cannot run torchtitan's policy (refused).
    DeepSpeed's and a device mesh's selective recompute is the user's model code: any list."""
    from placement.specs.recipe import RecomputeModule

    modules = tuple(recipe.recompute_modules)
    per_op = (RecomputeModule.PER_OP,)
    given = " ".join(recipe_args({"recompute_modules": modules})) if sources.get("recompute_modules") == "flag" \
        else f"recompute_modules from {sources.get('recompute_modules', '').removeprefix('file:')}"
    if framework == "torchtitan":
        if modules and modules != per_op:
            raise InputError(f"--framework torchtitan recomputes selectively with its per-op policy only "
                             f"({PER_OP_FRAMEWORK}), not {','.join(m.value for m in modules)}; drop {given}, give "
                             f"--recompute-modules per_op, or drop --framework")
        return recipe, sources
    if framework in ("megatron", "maxtext") and RecomputeModule.PER_OP in modules:
        raise InputError(f"--framework {framework} cannot run torchtitan's per-op checkpointing (recompute module "
                         f"per_op); drop {given}, give its own module list, or drop --framework")
    return recipe, sources


def _check_world_size(launch, topo: Topology, nodelist: str | None, cluster_graph: str | None,
                      host_order: tuple[str, list[str]] | None = None) -> None:
    """On a real allocation the launch files' world size, where they fix it, must be the allocation's GPUs: a job
    priced on more or fewer GPUs than it runs on is a different job (another dp, another batch split).
    `host_order`: (the --hosts file, its hosts), whose hosts are the job's own where their count fits."""
    world = launch.world_size
    source = launch.sources.get("world_size", "the launch files")
    if world is None and launch.launcher_nodes is not None:  # torchrun --nproc-per-node gpu: every GPU of each node
        world, source = launch.launcher_nodes * topo.gpus_per_host, launch.sources["launcher_nodes"]
    if world is None or world == topo.num_gpus:
        return
    from placement.loaders.hostlist import compress_hostlist

    per, hosts = topo.gpus_per_host, topo.num_hosts
    files = f"the launch files start {world} processes ({source})"
    given = (f"--nodelist {nodelist} gives {hosts} hosts x {per} GPUs = {topo.num_gpus}" if cluster_graph is None
             else f"--cluster-graph {cluster_graph} holds {hosts} hosts x {per} GPUs = {topo.num_gpus}")
    if world % per:
        fix = (f"{world} is not a whole number of {per}-GPU hosts: check the launch files' node count and processes "
               f"per node")
    elif world // per > hosts:
        fix = (f"the job runs on {world // per} hosts: give its whole host list ($SLURM_JOB_NODELIST of the job)"
               if cluster_graph is None else f"give a cluster graph holding the job's {world // per} hosts")
    elif cluster_graph is None and host_order is not None and len(host_order[1]) * per == world:
        # a user trial: the first hosts of the nodelist were suggested, not those --hosts says the job ran on
        fix = (f"pass the job's own {world // per} hosts, those of --hosts {host_order[0]}: --nodelist "
               f"'{compress_hostlist(list(host_order[1]))}'")
    elif cluster_graph is None:
        n = world // per
        fix = (f"pass the job's own {n} hosts, e.g. the first {n} of the nodelist: --nodelist "
               f"'{compress_hostlist(list(topo.host_names[:n]))}' (or the job's $SLURM_JOB_NODELIST)")
    else:
        fix = f"give a cluster graph of the job's {world // per} hosts"
    raise InputError(f"world size: {files}, but {given}; the audit prices the job on the GPUs it runs on: {fix}")


def _check_elastic_range(launch, topo: Topology, nodelist: str | None, gpus: int | None, nodes: int | None) -> None:
    """An elastic `torchrun --nnodes MIN:MAX` that no srun starts (LaunchLayout.launcher_node_range) leaves its node
    count to the audit's: that count must lie in the range, else the job priced is not one torchrun runs.  Below
    MIN its rendezvous never completes (torch/distributed/elastic/rendezvous/dynamic_rendezvous.py
    _add_to_participants opens the last call at min_nodes; torchrun stops at the 600 s join timeout); above MAX it
    runs the first MAX nodes to join and keeps the rest idle as spares (_add_to_redundancy_list).  A QA trial:
    `torchrun --nnodes=2:4 --nproc_per_node=8` on a 6-host --nodelist was priced on all 48 GPUs."""
    span = launch.launcher_node_range
    if span is None or launch.world_size is not None:
        return
    low, high = (int(x) for x in span.split(":"))
    per = launch.gpus_per_node or topo.gpus_per_host
    count = topo.num_gpus // per
    if low <= count <= high:
        return
    given = (f"--nodelist {nodelist} gives {topo.num_hosts} hosts" if nodelist is not None else
             f"--gpus {gpus} is {count} node{'' if count == 1 else 's'} of {per}" if gpus is not None else
             f"--nodes {nodes}" if nodes is not None else
             f"the {topo.cluster.name} cluster's default {topo.num_gpus:,} GPUs are {count} nodes of {per} (no "
             f"--gpus or --nodes)")
    runs = (f"its rendezvous waits for {low} nodes, so it never completes and torchrun stops at its join timeout "
            f"(600 s by default; torch dynamic_rendezvous.py)" if count < low else
            f"its rendezvous runs the first {high} nodes to join and keeps the other {count - high} idle as spares "
            f"(torch dynamic_rendezvous.py _add_to_redundancy_list), hosts no file fixes")
    raise InputError(f"node count: elastic torchrun --nnodes {span} ({launch.sources['launcher_node_range']}), but "
                     f"{given}: {runs}; audit the job on the nodes it runs on, {low} to {high} (--gpus "
                     f"{low * per} to {high * per}, or a --nodelist of that many hosts), or state a fixed --nnodes "
                     f"in the launch")


def _rings(rings: dict[int, float], source: str | None) -> str:
    """`rings of 2 GPUs at 100 GB/s, of 4 and 8 at 24 GB/s per GPU (--node-topo FILE)`: a measured node's in-node
    level, by group size (a user trial read "nvlink bridge: blocks of 8 GPUs, 369.0 GB/s per GPU" for a node whose
    8-GPU rings run over PCIe)."""
    by_rate: dict[float, list[int]] = {}
    for k, bw in rings.items():
        by_rate.setdefault(bw, []).append(k)
    parts = [f"of {' and '.join(map(str, ks))} at {bw / 1e9:.0f} GB/s" for bw, ks in by_rate.items()]
    return f"rings {', '.join(parts)} per GPU (raw link rate, --node-topo {source})"


def _check_per_host(launch, topo: Topology) -> None:
    """On a real allocation the processes the launch files start per node must be its hosts' GPUs: more start ranks
    with no GPU of their own (a user trial: Megatron-LM's Mixtral example, `torchrun --nproc_per_node 8`, on GB200
    trays of 4 GPUs was priced as 4 ranks per tray; Megatron's `torch.cuda.set_device(local_rank)` fails for local
    ranks 4-7, megatron/training/initialize.py), fewer leave GPUs of each host idle, which the allocation's
    topology does not describe."""
    per_node, per_host = launch.gpus_per_node, topo.gpus_per_host
    if per_node is None or "gpus_per_node" not in launch.sources or per_node == per_host:
        return
    files = f"the launch files start {per_node} processes per node ({launch.sources['gpus_per_node']})"
    hosts = f"the allocation's hosts have {per_host} GPUs each ({topo.cluster.name} nodes)"
    if per_node > per_host:
        raise InputError(f"processes per node: {files}, but {hosts}: local ranks {per_host}-{per_node - 1} of every "
                         f"host would have no GPU (the framework's set_device(local_rank) fails), so the job does not "
                         f"start; {_per_node_fix(launch, per_host)}"
                         + ("" if launch.tasks_per_node else ", or give the node type the job runs on (--node-type)"))
    raise InputError(f"processes per node: {files}, but {hosts}: the job would leave {per_host - per_node} GPUs of "
                     f"each host idle, which an allocation's audit does not price; start {per_host} per node, or audit "
                     f"it on a catalog cluster (--cluster C --gpus N), where a job on part of each node is priced")


def _per_node_fix(launch, per_host: int) -> str:
    """How the launch files start `per_host` processes per node: one srun task per node where several each run
    torchrun (LaunchLayout.tasks_per_node), else that many per node."""
    tasks = launch.tasks_per_node
    if tasks is None:
        return f"start {per_host} per node (e.g. torchrun --nproc_per_node {per_host})"
    each, where = launch.gpus_per_node // tasks, launch.sources["tasks_per_node"].split(": ", 1)[0]
    overridden = "takes precedence over --ntasks-per-node" in launch.sources["tasks_per_node"]
    return (f"start one srun task per node, --ntasks-per-node=1 ({where} gives {tasks}), and let its torchrun start "
            f"the node's {per_host} processes" + (f" (--nproc_per_node {per_host})" if each != per_host else "")
            # srun's own --ntasks-per-node yields to the job's task count it reads as -n unless its own -N stands
            # beside it (src/srun/opt.c _opt_verify): the fix says where it holds
            + (": srun's own --ntasks-per-node yields to the task count it takes from the job's environment unless "
               "srun's own -N stands beside it (srun -N $SLURM_NNODES --ntasks-per-node=1, or #SBATCH "
               "--ntasks-per-node=1)" if overridden else ""))


def _slurm_node_ranking(topo: Topology, slurm_conf: str | None, slurm_topology: str | None) -> None:
    """Record on `topo` what the cluster's slurm.conf says of SLURM's node ranking: TopologyParam=SwitchAsNodeRank
    (a tree topology) or BlockAsNodeRank (a block one) numbers the job's nodes leaf by leaf (block by block), which
    the audit then prices where the node ranks are SLURM's (slurm src/plugins/topology/tree/topology_tree.c,
    block/topology_block.c topology_p_generate_node_ranking; each option valid with its own plugin only,
    slurm.conf(5))."""
    if slurm_conf is None:
        return
    from placement.loaders.slurm import parse_slurm_conf

    if slurm_topology is None:
        raise InputError(f"--slurm-conf {slurm_conf}: its TopologyParam orders the nodes of a SLURM topology; give "
                         f"that topology with --slurm-topology (and the job's hosts with --nodelist), or drop "
                         f"--slurm-conf")
    conf = parse_slurm_conf(Path(slurm_conf))
    topo.slurm_conf_source = conf.source
    ranked = topo.slurm_rank_order
    if ranked is not None:
        param = "BlockAsNodeRank" if "BlockAsNodeRank" in ranked[1] else "SwitchAsNodeRank"
        topo.slurm_rank_order_on = conf.source if conf.has(param) else None


def _header_nodelist(launch, slurm_topology, nodelist: str | None):
    """(launch, nodelist) with the batch script's `#SBATCH --nodelist` (LaunchLayout.job_nodelist, the job's whole
    node list) taken in: the allocation's hosts where --slurm-topology comes without --nodelist, said in the sources;
    beside a --nodelist of other hosts, a warning naming both (the audit prices --nodelist's, as the job may have been
    submitted with `sbatch --nodelist` over the header).  A QA trial: a script asking `#SBATCH
    --nodelist=gpu[0036-0039]` was refused for want of --nodelist, and priced without a word on the --nodelist
    gpu[0001-0004] given instead."""
    from placement.loaders.hostlist import expand_hostlist, read_nodelist

    header = launch.job_nodelist
    if nodelist is not None and nodelist.startswith("@") and slurm_topology is not None:
        # a value read from a file carries its source (a QA trial: `--nodelist @hosts.txt` was priced without a word
        # on where the hosts came from, and never compared with the header's)
        hosts = read_nodelist(nodelist)
        shown = ", ".join(hosts[:3]) + (f" ... {hosts[-1]}" if len(hosts) > 3 else "")
        launch = launch.model_copy(update={"sources": {**launch.sources, "nodelist": (
            f"{len(hosts)} hosts read from {nodelist[1:]} (--nodelist {nodelist}), in its order: {shown}")}})
    if header is None or slurm_topology is None:
        return launch, nodelist
    where = launch.sources.get("job_nodelist", "#SBATCH --nodelist")
    if nodelist is None:
        return launch.model_copy(update={"sources": {**launch.sources, "nodelist": (
            f"{header}: {where}; no --nodelist given")}}), header
    given = read_nodelist(nodelist)  # an expression, or @FILE's hosts
    if set(given) != set(expand_hostlist(header)):
        launch = launch.model_copy(update={"warnings": (*launch.warnings, (
            f"--nodelist {nodelist} is not the hosts the batch script asks for ({header}, {where}); priced on "
            f"--nodelist's, as for a job submitted with `sbatch --nodelist` over its header: drop --nodelist to price "
            f"the header's"))})
    return launch, nodelist


def _gpus_used_per_node(launch, cluster_ref, real: bool) -> int | None:
    """The processes per node the launch files start where they are fewer than the catalog cluster's GPUs per node
    (the job then uses part of each node: cli.partial_nodes), else None.  More than a node holds is an error."""
    if real or launch.gpus_per_node is None or "gpus_per_node" not in launch.sources:
        return None
    node = load_cluster(cluster_ref).gpus_per_node
    if launch.gpus_per_node > node and launch.tasks_per_node is not None:
        raise InputError(f"processes per node: the launch files start {launch.gpus_per_node} processes per node "
                         f"({launch.sources['gpus_per_node']}) but {cluster_ref}'s nodes have {node} GPUs, so the job "
                         f"does not start; {_per_node_fix(launch, node)}")
    if launch.gpus_per_node > node:
        raise InputError(f"the launch files start {launch.gpus_per_node} processes per node "
                         f"({launch.sources['gpus_per_node']}) but {cluster_ref}'s nodes have {node} GPUs; give the "
                         f"cluster the job runs on (--cluster)")
    return launch.gpus_per_node if launch.gpus_per_node < node else None


def fabric_priced(topo: Topology, ctx: click.Context) -> str:
    """The network priced, tier by tier, and where each part of it came from (a user trial: the answer to "which
    group crosses the slow network" hung on a 2:1 spine no output named); `audit`'s sources, `plan` and `evaluate`."""

    def given(name: str) -> bool:
        return ctx.params.get(name) is not None and ctx.get_parameter_source(name) not in (
            click.core.ParameterSource.DEFAULT, None)

    # (a real allocation's blocks are its switches, of their own sizes: block_gpus 0)
    levels = topo.describe()
    # a level's ratio is the product of the uplinks' below it: above the first oversubscribed one it is said "in
    # all" (a user trial read a core's 4:1 as the core's own where only the leaves' uplinks were 4:1)
    tiers = "; ".join(f"{d['name']}: " + (f"blocks of {d['block_gpus']:,} GPUs, " if d["block_gpus"] else "")
                      + (_rings(d["ring_bandwidth_bytes_per_s"], topo.node_topo_source) if "ring_bandwidth_bytes_per_s"
                         in d else f"{d['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s per GPU")
                      + (f", {d['oversubscription']:g}:1 oversubscribed"
                         + (" in all (the uplinks below it)" if k and levels[k - 1]["oversubscription"] > 1 else "")
                         if d["oversubscription"] > 1 else "")
                      for k, d in enumerate(levels))
    # a cluster given as a file is named as that file, not as a catalog entry of its `name`
    ref = ctx.params.get("cluster_ref")
    own = ref is not None and ref not in cluster_names()
    choice = f" ({topo.slurm_choice})" if getattr(topo, "slurm_choice", None) else ""
    # a level's ratio is met where the job's GPUs span several blocks of the level below it
    met = [j for j, d in enumerate(levels) if j and d["oversubscription"] > 1 and len(set(topo.block_of[j - 1])) > 1]
    unused = ""
    if given("oversubscription") and ctx.params["oversubscription"] > 1 and not met:
        # a ratio no traffic of the job meets: every host under one switch (a QA trial: --oversubscription 4 on 4
        # nodes of one leaf was printed as priced, its step to the digit the 1:1 one)
        below = next((j - 1 for j, d in enumerate(levels) if j and d["oversubscription"] > 1), len(levels) - 1)
        hosts = f"the job's {topo.num_hosts} hosts sit" if topo.num_hosts > 1 else "the job's one host sits"
        unused = (f", which prices nothing here: {hosts} under one {levels[below]['name']} and no traffic of the job "
                  f"crosses its uplinks, so the step is the 1:1 one")
    origin = [f"--slurm-topology {ctx.params['slurm_topology']}{choice}" if given("slurm_topology") else
              f"--cluster-graph {ctx.params['cluster_graph']}" if given("cluster_graph") else
              f"the tiers of --cluster {ref}" if own else f"cluster {topo.cluster.name}'s catalog file",
              "each switch's ratio from the graph's link bandwidths (down:up)" if given("cluster_graph") else
              f"--oversubscription {ctx.params['oversubscription']:g}{unused}" if given("oversubscription") else
              f"oversubscription from the tiers of --cluster {ref} (--oversubscription changes it with "
              f"--slurm-topology)" if own and not given("slurm_topology") else
              f"oversubscription from cluster {topo.cluster.name}'s file (a copy of that file with another "
              f"tiers[0].oversubscription, passed as --cluster FILE, changes it; --oversubscription does with "
              f"--slurm-topology)" if topo.cluster.name and not given("slurm_topology") else
              f"oversubscription from the node designs' files, the largest of "
              f"{', '.join(topo.cluster.name[len('mixed('):-1].split('+'))} (--oversubscription changes it)"
              if topo.cluster.name.startswith("mixed(") else
              f"oversubscription from cluster {topo.cluster.name}'s file (--oversubscription changes it)"]
    if accelerator_file_given(topo.cluster.accelerator):
        # a part of the user's: its numbers come from their file, which no published run checks
        origin.append(f"accelerator {topo.accelerator.name} from {topo.cluster.accelerator}")
    if met:
        # a user trial: one node in each of two 4:1 leaves priced 2.5x one leaf, on a rule no output stated
        origin.append("an oversubscribed switch's uplinks are shared by the job's GPUs under it as if the switch's "
                      "other ports sent too (a shared cluster's busy case): a few of the job's nodes alone under a "
                      "leaf get its ratio, not the leaf's whole uplink")
    if topo.link_speeds:
        # what the topology file's LinkSpeed= values are to the price: read, not used (a user trial found them
        # dropped without a word); SLURM gives them no unit and uses them for nothing but its own reports
        origin.append(f"its LinkSpeed= values ({', '.join(map(str, topo.link_speeds))}) seen, not priced: SLURM gives "
                      f"them no unit; --oversubscription or the node type's tiers set what a switch level carries")
    return f"{tiers} ({'; '.join(origin)})"


def _job_sources(launch, ctx: click.Context, topo, train, model, real: bool) -> dict[str, str]:
    """Where the audited job's GPU count, sequence, batch and precision came from when the launch files do not
    say: a flag, the allocation, or a catalog default (named, with its value)."""
    from placement.audit.core import DEFAULT_TAILS  # the audit's base_config_unread finding matches these ends

    def given(name: str) -> bool:
        return ctx.get_parameter_source(name) not in (click.core.ParameterSource.DEFAULT, None)

    out = {}
    if "world_size" not in launch.sources or given("gpus") or given("nodes"):
        out["num_gpus"] = (f"--gpus {topo.num_gpus}" if given("gpus") else f"--nodes {ctx.params['nodes']}"
                           if given("nodes") else "the allocation (--slurm-topology / --cluster-graph)" if real
                           else f"the launch files' {launch.launcher_nodes} nodes x {topo.gpus_per_host} GPUs, each "
                           f"node's {topo.cluster.name} GPUs ({launch.sources['launcher_nodes']})"
                           if launch.launcher_nodes is not None
                           else f"the cluster's default size ({topo.num_gpus} GPUs): {DEFAULT_TAILS[0]}")
        if (given("gpus") or given("nodes")) and not real and launch.world_size not in (None, topo.num_gpus):
            # the flag over the files' own count prices the job at another size (another dp, another batch split):
            # said beside it (a QA trial: `srun -N 1 -n 8 python pretrain_gpt.py` with --gpus 16 was priced as dp 8
            # on 16 GPUs under the source '--gpus 16', the files' 8 unsaid)
            out["num_gpus"] += (f", over the launch files' {launch.world_size} processes "
                                f"({launch.sources.get('world_size', 'the files')}): priced at the flag's size, not "
                                f"the one the files start; drop the flag to price the job as written")
    if "seq_len" not in launch.sources:
        out["seq_len"] = (f"--seq-len {train.seq_len}" if given("seq_len")
                          else f"model {model.name}'s default ({train.seq_len}): {DEFAULT_TAILS[0]}")
    if "global_batch" not in launch.sources:
        out["global_batch"] = (f"--global-batch {train.global_batch}" if given("global_batch")
                               else f"model {model.name}'s default ({train.global_batch}): {DEFAULT_TAILS[0]}")
    if "precision" not in launch.sources:
        out["precision"] = (f"--precision {train.precision}" if given("precision")
                            else f"placement's default ({train.precision}): {DEFAULT_TAILS[1]}")
    out["fabric"] = fabric_priced(topo, ctx)
    return out


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.option("--runs", "runs_files", multiple=True, type=click.Path(dir_okay=False),
              help="Your own measured runs instead of the published ones: a step YAML or a Megatron-LM log (the "
                   "formats of `placement calibrate --steps`); repeatable.")
@click.option("--cluster", "cluster_ref", default=None,
              help="The cluster --runs ran on (default: the --calibration profile's).")
@CALIBRATION_OPTION
@handle_errors
def validate(as_json, runs_files, cluster_ref):
    """Predicted vs published step time for every calibration run; with --calibration, with and without the
    profile, and with --runs, on your own measured runs."""
    from tqdm import tqdm

    from placement.calibration.validate import load_runs, summary
    from placement.calibration.validate import validate as run_validation
    from placement.report import validate_json, validate_table

    path, profile = _calibration()
    if cluster_ref is not None:
        if not runs_files and profile is None:
            raise InputError(f"--cluster {cluster_ref}: the cluster of your --runs (and of a --calibration profile's "
                             f"comparison); the published runs name their own clusters: give --runs FILE, or drop "
                             f"--cluster")
        from placement.catalog import load_cluster

        load_cluster(cluster_ref)  # an unknown name or an empty file is an error before any run is read
    if runs_files or profile is not None:
        from placement.calibration.compare import compare_json, compare_runs, compare_table

        rows = compare_runs(profile, [Path(f) for f in runs_files], cluster_ref)
        if profile is not None:  # the calibrated column of runs on another cluster design
            from placement.catalog import load_cluster

            _design_warnings(profile, [load_cluster(ref) for ref in dict.fromkeys(
                cluster_ref or c.run.cluster for c in rows)])
        if as_json:
            data = compare_json(rows)
            for row, c in zip(data["runs"], rows, strict=True):  # the layout each was priced in, as a command
                row["command"] = (None if c.priced is None or c.priced.layout is None
                                  else evaluate_command(c.run, c.priced.layout, c.priced.recipe or {}))
            click.echo(json.dumps(data | {"calibration": calibration_json()}))
        else:
            click.echo(compare_table(rows, str(path) if path else None))
        return
    with tqdm(total=len(load_runs()), desc="validate", unit="run", file=sys.stderr, leave=False, disable=None,
              delay=2.0) as bar:
        results = run_validation(progress=bar.update)
    mean, worst = summary(results)
    if not as_json:
        click.echo(validate_table(results, mean, worst))
        return
    data = validate_json(results, mean, worst)
    for row, r in zip(data["runs"], results, strict=True):
        row["command"] = None if r.layout is None else evaluate_command(r.run, r.layout, r.recipe or {})
    # the keys of the profile's form, null without one (README: `calibration` null without a profile; a user check
    # found them absent, a KeyError for a script that reads both forms)
    click.echo(json.dumps(data | {"calibration": None, "summary": None}))


@main.command()
@click.option("--nccl", "nccl_files", multiple=True, type=click.Path(dir_okay=False),
              help="nccl-tests output (all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf, "
                   "sendrecv_perf), inside a node or across nodes; repeatable.")
@click.option("--steps", "step_files", multiple=True, type=click.Path(dir_okay=False),
              help="Measured training steps: a Megatron-LM log (its arguments block and `elapsed time per iteration` "
                   "lines) or a YAML list of {model, num_gpus, seq_len, global_batch, precision, layout, recipe, "
                   "step_time_s}; repeatable.")
@click.option("--gemm", "gemm_file", type=click.Path(dir_okay=False), default=None,
              help="GEMM benchmark CSV with columns m,n,k,dtype,tflops (dtype bf16 or fp8).")
@click.option("--cluster", "cluster_ref", default="dgx-h100", show_default=True,
              help="Catalog cluster (or YAML) the measurements ran on.")
@click.option("--gpus", type=int, default=None, help="GPU count of the cluster (default: its default size).")
@click.option("--slurm-topology", type=click.Path(dir_okay=False), default=None,
              help="SLURM topology.conf of the real cluster, instead of --cluster.")
@click.option("--nodelist", default=None, help="The hosts (hostlist expression or @FILE), with --slurm-topology.")
@click.option("--node-type", multiple=True, help="Catalog cluster whose node design the hosts have.")
@click.option("--oversubscription", type=float, default=None,
              help="Down:up ratio of the leaf uplinks of the real cluster (with --slurm-topology): a multi-node run "
                   "whose hosts sit under two leaves is priced across them.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False), required=True,
              help="Where to write the calibration profile (YAML).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the fitted constants, defaults, uncertainties and per-measurement residuals as JSON.")
@click.option("--report", "report_file", type=click.Path(dir_okay=False), default=None,
              help="Also write an HTML page: measured against predicted, before and after the fit.")
@handle_errors
def calibrate(nccl_files, step_files, gemm_file, cluster_ref, gpus, slurm_topology, nodelist, node_type,
              oversubscription, out_file, as_json, report_file):
    """Fit the cost model's constants (bandwidths, latencies, GEMM efficiency, host time, overlap) to your
    cluster's nccl-tests outputs and measured steps; write a profile for --calibration."""
    import yaml

    from placement.calibration.calibrate import Calibration
    from placement.calibration.report import calibrate_html, calibrate_json, calibrate_table
    from placement.outfiles import check_out_file, write_atomic

    out = check_out_file(out_file, "--out")
    report = check_out_file(report_file, "--report") if report_file else None
    ctx = click.get_current_context()
    if slurm_topology is not None and ctx.get_parameter_source("cluster_ref") is not click.core.ParameterSource.DEFAULT:
        raise InputError(f"--cluster {cluster_ref} and --slurm-topology both describe the machine; give one (the node "
                         f"design of a real cluster goes in --node-type)")
    _positive("--gpus", gpus)
    _no_repeated_files("--nccl", nccl_files)
    _no_repeated_files("--steps", step_files)
    topo = build_topology(cluster_ref, gpus, None, slurm_topology, nodelist, node_type, None, oversubscription)
    if slurm_topology is None and ctx.get_parameter_source("cluster_ref") is click.core.ParameterSource.DEFAULT:
        # a QA note: measurements from another machine fitted against DGX H100 constants, unsaid
        click.echo(f"placement: note: cluster {cluster_ref}: placement's default machine, whose constants the "
                   f"measurements are fitted against (give --cluster NAME or FILE of the machine they ran on)",
                   err=True)
    name = cluster_ref if slurm_topology is None else topo.cluster.name
    profile = Calibration(topo, name, [Path(f) for f in nccl_files], [Path(f) for f in step_files],
                          Path(gemm_file) if gemm_file else None).run()
    write_atomic(out, yaml.safe_dump(profile.model_dump(mode="json"), sort_keys=False, width=120))
    if report is not None:
        write_atomic(report, calibrate_html(profile))
        click.echo(f"wrote {report}", err=True)
    click.echo(json.dumps(calibrate_json(profile)) if as_json else calibrate_table(profile, str(out)))


def _paths_from_sweep_file(spec, sweep_path):
    """A design's `cluster` and a workload's `model` given as a relative path are read beside the sweep file where
    a file of that name is there (a user trial's `cluster: ../cl/over100.yaml` was looked up from the current folder,
    so the study ran only from one folder); otherwise as given (a catalog name, or a path from the current folder)."""
    from pathlib import Path

    def beside(ref: str) -> str:
        given = Path(ref)
        if given.is_absolute() or not (given.suffix or "/" in ref):
            return ref
        there = sweep_path.parent / given
        return str(there) if there.is_file() else ref

    return spec.model_copy(update={
        "designs": tuple(d.model_copy(update={"cluster": beside(d.cluster)}) for d in spec.designs),
        "workloads": tuple(w.model_copy(update={"model": beside(w.model)}) for w in spec.workloads)})


def _no_repeated_files(flag: str, paths: tuple[str, ...]) -> None:
    """Each measurement once: a file given twice (or two files of the same bytes) would weigh its rows double, move
    the fit and shrink its standard errors by about sqrt(2) (a user trial)."""
    import hashlib

    from placement.loaders.files import read_bytes

    seen: dict[str, str] = {}
    for p in paths:
        try:  # bounded, and a pipe's bytes kept for its reader (a user trial: /dev/zero read until the OOM killer)
            digest = hashlib.sha256(read_bytes(Path(p), f"{flag} file", "give a measurement file")).hexdigest()
        except OSError:
            continue  # the reader names a missing or unreadable file
        if digest in seen:
            same = "is given twice" if Path(p).resolve() == Path(seen[digest]).resolve() else \
                f"has the same bytes as {seen[digest]}"
            raise InputError(f"{flag} {p} {same}: its measurements would count twice in the fit (and its standard "
                             f"errors shrink as if they were independent); give each file once")
        seen[digest] = p


def recipe_args(recipe: dict) -> list[str]:
    """The flags that set each field of `recipe` (a JSON dump of the fields that differ from the defaults)."""
    out: list[str] = []
    for field, value in recipe.items():
        flag = RECIPE_FLAGS[field]
        if isinstance(value, bool):
            out.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, (list, tuple)):
            out += [flag, ",".join(str(v) for v in value)]
        else:
            out += [flag, str(value)]
    return out


@functools.cache
def _is_moe(model_ref: str) -> bool:
    """Whether the model `model_ref` names has experts (loaded once a process: validate asks for every row)."""
    from placement.catalog import load_model

    return load_model(model_ref).moe is not None


def evaluate_command(run, layout: dict, recipe: dict) -> str:
    """The `placement evaluate` command that prices calibration run `run` in `layout` under `recipe` (both as
    `validate --json` reports them): what a user runs to reproduce the row's prediction."""
    import shlex

    from placement.calibration.published import MOE_ONLY

    if not _is_moe(run.model):  # evaluate refuses what prices nothing in a dense model
        recipe = {k: v for k, v in recipe.items() if k not in MOE_ONLY}
    if run.precision.value != "fp8":  # an FP8 recipe prices nothing in a 16-bit run (a framework's default of it)
        recipe = {k: v for k, v in recipe.items() if k not in ("fp8_recipe", "fp8_params")}
    args = ["placement", "evaluate", "--model", run.model, "--cluster", run.cluster, "--gpus", str(run.num_gpus)]
    if run.segment_nodes is not None:
        args += ["--segment", str(run.segment_nodes)]
    args += ["--seq-len", str(run.seq_len), "--global-batch", str(run.global_batch), "--precision", run.precision.value]
    for flag, key in (("--tp", "tp"), ("--cp", "cp"), ("--ep", "ep"), ("--etp", "etp"), ("--pp", "pp"),
                      ("--vpp", "vpp"), ("--mbs", "micro_batch_size"), ("--zero", "zero_stage"),
                      ("--dp-shard", "dp_shard"), ("--recompute", "recompute")):
        if layout.get(key) is not None:
            args += [flag, str(layout[key])]
    if layout["tp"] > 1:
        args.append("--sequence-parallel" if layout["sequence_parallel"] else "--no-sequence-parallel")
    return shlex.join(args + recipe_args(recipe))


if __name__ == "__main__":
    main()
