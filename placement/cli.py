"""The command line: a thin click layer.  It builds typed specs from flags, calls the core, and prints.

Exit codes: 0 ok; 1 infeasible (or `evaluate` of a layout over capacity); 2 bad input.  Errors are
one paragraph on stderr, never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps

import click
from pydantic import ValidationError

from placement import __version__
from placement.catalog import cluster_names, load_accelerator, load_cluster, load_model, model_names
from placement.errors import InputError, PlacementInfeasible
from placement.loaders.errors import format_validation_error
from placement.specs import Layout, ModelSpec, Precision, Recompute, TrainingSpec
from placement.topology import Topology

EXIT_OK, EXIT_INFEASIBLE, EXIT_BAD_INPUT = 0, 1, 2


def _fail(code: int, message: str) -> None:
    click.echo(f"placement: {message}", err=True)
    sys.exit(code)


def handle_errors(fn: Callable) -> Callable:
    """Map the core's typed errors to exit codes with one-paragraph messages."""

    @wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except InputError as err:
            _fail(EXIT_BAD_INPUT, str(err))
        except ValidationError as err:
            _fail(EXIT_BAD_INPUT, format_validation_error(err, "input"))
        except PlacementInfeasible as err:
            _fail(EXIT_INFEASIBLE, f"infeasible ({err.binding}): {err}")

    return wrapper


def job_options(fn: Callable) -> Callable:
    opts = [
        click.option("--model", "model_ref", required=True,
                     help="Catalog name (see `placement show models`), a model YAML, or a HuggingFace config.json."),
        click.option("--cluster", "cluster_ref", default="dgx-h100", show_default=True,
                     help="Catalog name (see `placement show clusters`) or a cluster YAML."),
        click.option("--gpus", type=int, default=None, help="GPU count (default: the cluster's default size)."),
        click.option("--nodes", type=int, default=None, help="Node count, instead of --gpus."),
        click.option("--seq-len", type=int, default=None, help="Tokens per sequence (default: the model's)."),
        click.option("--global-batch", type=int, default=None, help="Sequences per step (default: the model's)."),
        click.option("--precision", type=click.Choice([p.value for p in Precision]), default="bf16",
                     show_default=True, help="GEMM precision."),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise InputError(f"{name} {value}: must be a positive integer")


def build_job(model_ref, cluster_ref, gpus, nodes, seq_len, global_batch, precision):
    """Flags -> (ModelSpec, TrainingSpec, Topology); every failure is an InputError."""
    for name, value in (("--gpus", gpus), ("--nodes", nodes), ("--seq-len", seq_len),
                        ("--global-batch", global_batch)):
        _positive(name, value)
    model = load_model(model_ref)
    cluster = load_cluster(cluster_ref)
    topo = Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=gpus, num_nodes=nodes)
    train = TrainingSpec(seq_len=seq_len or model.default_seq_len,
                         global_batch=global_batch or model.default_global_batch, precision=Precision(precision))
    return model, train, topo


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="placement")
def main() -> None:
    """Choose and map the parallel layout of a training job onto a GPU cluster."""


@main.command()
@job_options
@click.option("--top-k", type=click.IntRange(1, 100), default=5, show_default=True, help="Plans to return.")
@click.option("--recompute", type=click.Choice([r.value for r in Recompute]), multiple=True,
              help="Allowed recompute modes (repeatable; default all).")
@click.option("--zero", type=click.IntRange(0, 3), multiple=True, help="Allowed ZeRO stages (repeatable; default all).")
@handle_errors
def plan(model_ref, cluster_ref, gpus, nodes, seq_len, global_batch, precision, as_json, top_k, recompute, zero):
    """Search every layout; print the fastest that fit, best first."""
    from placement.report import plan_json, plan_table
    from placement.search import SearchConfig, search

    model, train, topo = build_job(model_ref, cluster_ref, gpus, nodes, seq_len, global_batch, precision)
    cfg = SearchConfig(top_k=top_k,
                       recompute=tuple(Recompute(r) for r in recompute) or SearchConfig.recompute,
                       zero_stages=tuple(sorted(set(zero))) or SearchConfig.zero_stages)
    result = search(model, train, topo, cfg)
    if as_json:
        click.echo(json.dumps(plan_json(result, model, train, topo)))
    else:
        click.echo(plan_table(result, model, train, topo))


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
@handle_errors
def evaluate(model_ref, cluster_ref, gpus, nodes, seq_len, global_batch, precision, as_json, tp, cp, ep, etp, pp,
             vpp, mbs, zero, dp_shard, recompute, sequence_parallel):
    """Estimate one given layout (dp is derived from the GPU count); exit 1 if it does not fit."""
    from placement.evaluate import evaluate_layout
    from placement.report import single_plan_table

    model, train, topo = build_job(model_ref, cluster_ref, gpus, nodes, seq_len, global_batch, precision)
    per_replica = tp * cp * pp
    for name, value in (("--tp", tp), ("--cp", cp), ("--ep", ep), ("--etp", etp), ("--pp", pp), ("--vpp", vpp),
                        ("--mbs", mbs)):
        _positive(name, value)
    if topo.num_gpus % per_replica:
        raise InputError(
            f"tp ({tp}) * cp ({cp}) * pp ({pp}) = {per_replica} does not divide the {topo.num_gpus} GPUs; "
            f"dp = GPUs / (tp * cp * pp) must be whole"
        )
    sp = tp > 1 if sequence_parallel is None else sequence_parallel
    layout = Layout(tp=tp, cp=cp, ep=ep, etp=etp, pp=pp, vpp=vpp, dp=topo.num_gpus // per_replica,
                    micro_batch_size=mbs, zero_stage=zero, dp_shard=dp_shard, recompute=Recompute(recompute),
                    sequence_parallel=sp)
    result = evaluate_layout(model, train, topo, layout)
    if as_json:
        click.echo(json.dumps(result.model_dump(mode="json")))
    else:
        click.echo(single_plan_table(result))
    if not result.fits:
        sys.exit(EXIT_INFEASIBLE)


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
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def show_cluster(ref, gpus, nodes, as_json):
    """Levels, bandwidths and latencies of a cluster design at a size."""
    from placement.report import cluster_facts, cluster_table

    cluster = load_cluster(ref)
    topo = Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=gpus, num_nodes=nodes)
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


@main.command()
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def validate(as_json):
    """Predicted vs published step time for every calibration run."""
    from placement.calibration.validate import summary
    from placement.calibration.validate import validate as run_validation
    from placement.report import validate_json, validate_table

    results = run_validation()
    mean, worst = summary(results)
    click.echo(json.dumps(validate_json(results, mean, worst)) if as_json else validate_table(results, mean, worst))


if __name__ == "__main__":
    main()
