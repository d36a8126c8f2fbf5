"""launch.sbatch: one SLURM batch script that starts the plan on every node of the allocation.

`sbatch launch.sbatch [megatron|torchtitan|deepspeed|maxtext]` from the --out folder, for the formats emitted
(Megatron-LM where none was asked for).  The batch step runs `srun` with one task per node; each task re-enters this
same script (`--task`) from the plan folder, finds its node rank in the planned host order (hosts.txt) from its SLURM
node name (`SLURMD_NODENAME`), sets the GPU order of its host (cuda_visible_devices.txt, when the plan permutes a
host's GPUs) and the static rendezvous, and execs the same command the framework file writes for that host:
`torchrun`, the deepspeed launcher without ssh (`--no_ssh --node_rank`), or MaxText's train command, one JAX process
per node.  A DeviceMesh is a module of the user's own program, which this script cannot start: where it is all that
was emitted, the script says so and launches nothing (a QA round: it started Megatron-LM, never emitted, and priced
it with Transformer Engine's rules).  A plan made on real hosts pins them (`#SBATCH --nodelist`), so `sbatch
launch.sbatch` gets the nodes the plan was priced on; a node of the allocation that is not in hosts.txt stops the job
with its name: the plan was made for other hosts.
"""

from __future__ import annotations

import shlex

from placement import __version__
from placement.cost.constants import ALLOCATOR_FRAGMENTATION
from placement.emit import deepspeed, maxtext, megatron, torchtitan
from placement.emit.common import ALLOCATOR_EXPORT, DOES_NOT_START, EmitContext, header_runs, numa_binding

WORKERS = {"megatron": megatron.worker, "torchtitan": torchtitan.worker}
"""Formats whose nodes run one torchrun each."""
TASKS = {"deepspeed": deepspeed.sbatch_task, "maxtext": maxtext.sbatch_task}
"""Formats whose nodes run their own launcher line."""
TASK_ENV = {"maxtext": maxtext.sbatch_env}
"""Lines a TASKS format's task runs before its `exec` (MaxText reads its process id and coordinator from the
environment)."""
RUNS = {"megatron": megatron.runs, "torchtitan": torchtitan.runs, "deepspeed": deepspeed.files_run,
        "maxtext": maxtext.files_run}
TASK_WARNINGS = {"deepspeed": deepspeed.warnings_for, "maxtext": maxtext.sbatch_warnings}
"""The warnings of each TASKS format's files (a WORKERS format's come with its worker), whose `refusal`s make its
line say it does not start (common.header_runs)."""
NAMES = {"megatron": "Megatron-LM", "torchtitan": "torchtitan", "deepspeed": "DeepSpeed", "maxtext": "MaxText"}
NOT_LAUNCHED = {"devicemesh": "device_mesh.py is a module your own training program imports, which this script "
                              "cannot start"}
"""Formats launch.sbatch cannot start, and why (said in the script, never priced there)."""
MASTER_PORT = 29500


def launched(formats: list[str]) -> list[str]:
    """The formats launch.sbatch starts, the first its default: those of `formats` it can launch, in WORKERS then
    TASKS order; Megatron-LM where no format was asked for (the script carries its arguments itself); none where
    only formats it cannot start were (NOT_LAUNCHED), which the script then says."""
    if not formats:
        return ["megatron"]
    return [f for f in (*WORKERS, *TASKS) if f in formats]


def whole_domain_segment(cluster, nodes: int) -> int | None:
    """The `sbatch --segment` that asks SLURM for what a plan without a segment prices on a multi-node scale-up
    domain (GB200 NVL72): whole domains, or one domain's share for a job smaller than one.  Without it the block
    plugin places the job best-fit, whole racks not promised (slurm topology.html "block"; a user trial found a
    576-node GB200 script with none).  None where a node is its own domain, or the nodes do not fill domains."""
    per_domain = cluster.scale_up.size // cluster.gpus_per_node
    if per_domain <= 1:
        return None
    if nodes < per_domain:
        return nodes
    return per_domain if nodes % per_domain == 0 else None


def nothing_launched(ctx: EmitContext, formats: list[str]) -> str:
    """launch.sbatch where every emitted format is one it cannot start (NOT_LAUNCHED): a script that says so and exits
    2, with no #SBATCH request and no price (no framework of it was emitted)."""
    lay, p = ctx.plan.layout, ctx.plan
    why = "; ".join(NOT_LAUNCHED[f] for f in formats if f in NOT_LAUNCHED)
    said = (f"launch.sbatch launches nothing that was emitted ({why}): start your program on the hosts of hosts.txt in "
            f"its order (node rank k on its k-th host), or emit {', '.join((*WORKERS, *TASKS))} for a launch")
    return "\n".join([
        "#!/bin/bash",
        f"# placement {__version__}: {p.model} on {p.num_gpus} x {p.accelerator}, layout tp {lay.tp} cp {lay.cp} "
        f"ep {lay.ep} pp {lay.pp} (vpp {lay.vpp}) dp {lay.dp}",
        f"# {said}",
        f"echo {shlex.quote(said)} >&2",
        "exit 2",
    ]) + "\n"


def render(ctx: EmitContext, formats: list[str]) -> str:
    """The batch script for the formats among `formats` that launch per node (megatron first: the default)."""
    lay, p = ctx.plan.layout, ctx.plan
    frameworks = launched(formats)
    if not frameworks:
        return nothing_launched(ctx, formats)
    # a job of fewer GPUs than a node's runs on one node, on that many of its GPUs (a user trial: --nodes=0)
    nodes = -(-p.num_gpus // ctx.topo.gpus_per_host)
    gph = min(ctx.topo.gpus_per_host, p.num_gpus)
    head = [
        "#!/bin/bash",
        f"# SLURM launch for a placement plan (placement {__version__}): {p.model} on {p.num_gpus} x {p.accelerator}",
        f"# layout tp {lay.tp} cp {lay.cp} ep {lay.ep} pp {lay.pp} (vpp {lay.vpp}) dp {lay.dp}"
        + (f" (HSDP: shard groups of {lay.dp_shard})" if lay.dp_shard != lay.dp else "") + "; predicted "
        f"{p.step_time_s:.3f} s/step",
        f"# usage, from this folder: sbatch launch.sbatch [{'|'.join(frameworks)}]   (default {frameworks[0]})",
        f"#SBATCH --job-name=placement-{p.model}",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={gph}",
        # the whole node: the price binds each rank to its GPU's NUMA node (cpu_affinity), which a task holding the
        # partition's default of one CPU cannot do (a user trial's launch asked for no CPUs or memory)
        "#SBATCH --exclusive",
        "#SBATCH --mem=0",
    ]
    placeholder = all(name.startswith("host") and name[4:].isdigit() for name in ctx.topo.host_names[:2])
    # with the plan's own hosts pinned, a segment of whole racks could contradict them (a user trial's GB200 plan on
    # 9 + 9 trays of two racks asked for --segment=18 beside that --nodelist, which no block can hold)
    segment = p.segment_nodes or (whole_domain_segment(ctx.topo.cluster, nodes) if placeholder else None)
    if segment:
        head.append(f"#SBATCH --segment={segment}")
        if not p.segment_nodes:
            head.append("# --segment: the plan prices whole scale-up domains (racks); SLURM's topology/block places "
                        "each segment in one block (24.05 and later), other topology plugins ignore it")
    if placeholder:
        head.append("# hosts.txt holds the catalog's placeholder names: plan on the allocation (--slurm-topology "
                    "--nodelist) to launch on real hosts")
    else:  # the plan's own hosts: SLURM must give the job these nodes, or a task stops at the hosts.txt lookup
        from placement.loaders.hostlist import compress_hostlist

        head.append(f"#SBATCH --nodelist={compress_hostlist(sorted(set(ctx.hosts_in_rank_order)))}")
    head += [f"# not launched from here: {NOT_LAUNCHED[f]}" for f in formats if f in NOT_LAUNCHED]
    worked = {name: WORKERS[name](ctx) for name in frameworks if name in WORKERS}
    for name in frameworks:  # where a framework cannot state the plan, both numbers (as its own file says)
        warnings = worked[name][3] if name in worked else TASK_WARNINGS[name](ctx)
        # a file that does not start is not re-priced: its layout may be one the cost model refuses (maxtext.render)
        refused = any(w.startswith(DOES_NOT_START) for w in warnings)
        line, _ = header_runs(NAMES[name], warnings, *(("", "") if refused else ctx.runs_as(RUNS[name](ctx))))
        if line:
            head.append(f"# {name}: {line}")
    cases = []
    for name in frameworks:
        if name in TASKS:
            env = ["export CUDA_LAUNCH_BLOCKING=1"] if ctx.recipe.cuda_launch_blocking else []
            env += TASK_ENV[name](ctx) if name in TASK_ENV else []
            cases.append(f"  {name})\n" + "".join(f"    {x}\n" for x in env) + f"    exec {TASKS[name](ctx)}\n    ;;\n")
            continue
        preamble, command, _, _ = worked[name]
        if ctx.recipe.cuda_launch_blocking:  # priced with blocking launches (recipe cuda_launch_blocking)
            preamble = "export CUDA_LAUNCH_BLOCKING=1\n" + preamble
        body = "".join(f"    {line}\n" for line in preamble.splitlines())
        cases.append(f"  {name})\n{body}    exec torchrun --nnodes \"$NNODES\" --nproc-per-node \"$GPUS_PER_NODE\" "
                     f"--node-rank \"$NODE_RANK\" --master-addr \"$MASTER_ADDR\" --master-port \"$MASTER_PORT\" "
                     f"{numa_binding(ctx)}{command}\n    ;;\n")
    task = f'''if [[ "${{1:-}}" == --task ]]; then  # one per node, started by srun below
  NODE_RANK=$(awk -v h="$SLURMD_NODENAME" '!/^#/ && $2 == h {{print $1}}' "$PLAN_DIR/hosts.txt")
  if [[ -z "$NODE_RANK" ]]; then
    echo "launch.sbatch: node $SLURMD_NODENAME is not in $PLAN_DIR/hosts.txt: the plan was made for other hosts" >&2
    exit 1
  fi
  if [[ -f "$PLAN_DIR/cuda_visible_devices.txt" ]]; then
    CVD=$(awk -v h="$SLURMD_NODENAME" '!/^#/ && $1 == h {{sub("CUDA_VISIBLE_DEVICES=", "", $2); print $2}}' \\
      "$PLAN_DIR/cuda_visible_devices.txt")
    if [[ -n "$CVD" ]]; then export CUDA_VISIBLE_DEVICES="$CVD"; fi
  fi
  case "$FRAMEWORK" in
{"".join(cases)}  *)
    echo "launch.sbatch: unknown framework $FRAMEWORK (written: {' '.join(frameworks)})" >&2
    exit 2
    ;;
  esac
fi
'''
    batch = f'''set -euo pipefail
PLAN_DIR=${{PLAN_DIR:-${{SLURM_SUBMIT_DIR:-$PWD}}}}
FRAMEWORK=${{FRAMEWORK:-${{1:-{frameworks[0]}}}}}
NNODES={nodes}
GPUS_PER_NODE={gph}
MASTER_ADDR=$(awk '!/^#/ && NF {{print $2; exit}}' "$PLAN_DIR/hosts.txt")
MASTER_PORT=${{MASTER_PORT:-{MASTER_PORT}}}
export PLAN_DIR FRAMEWORK NNODES GPUS_PER_NODE MASTER_ADDR MASTER_PORT
# the plan's memory prices PyTorch's expandable segments ({ALLOCATOR_FRAGMENTATION:.0%} lost to fragmentation):
# kept unless you set your own
{ALLOCATOR_EXPORT}'''
    launch = ('srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash "$PLAN_DIR/launch.sbatch" --task\n')
    return "\n".join(head) + "\n" + batch + task + launch
