"""The emitted MaxText config, run through MaxText 0.2.5's own mesh code and JAX 0.10.2's
`create_hybrid_device_mesh` on fake GPU devices, gives the groups the plan intends.

MaxText 0.2.5 needs Python >= 3.12 and flax/orbax to import, so its wheel is installed without
dependencies and never imported: its base.yml gives the key set and defaults, and the functions that
turn a config into a device mesh (`maxtext_utils.create_device_mesh`, `max_utils.fill_unspecified_mesh_axes`,
`types._resolve_parallelism` and the ici_map / dcn_map of `MaxTextConfig`) are read from its source files
and run as they are.  Fake devices follow XLA on GPUs: one JAX process per host, `slice_index` = process
index (one slice per boot id, `topology_util.cc::BuildGlobalTopology`), ids numbered process by process,
ordinal l of a process = the l-th GPU of its CUDA_VISIBLE_DEVICES.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.metadata
import math
import os
import re
from types import SimpleNamespace

import jax
import numpy as np
import pytest
import yaml
from jax.experimental import mesh_utils

from placement.emit import maxtext
from placement.emit.common import EmitContext
from tests.verify.helpers import CASES, group_of, plan_context, planned

MAXTEXT = importlib.metadata.distribution("maxtext")  # fails collection when the wheel is missing
assert MAXTEXT.version == "0.2.5", MAXTEXT.version
assert jax.__version__ == "0.10.2", jax.__version__


def _source(path: str) -> ast.Module:
    return ast.parse(MAXTEXT.locate_file(f"maxtext/{path}").read_text())


def _function(module: ast.Module, name: str, scope: dict):
    node = next(n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == name)
    exec(compile(ast.Module(body=[node], type_ignores=[]), f"maxtext:{name}", "exec"), scope)
    return scope[name]


def _dict_literal(module: ast.Module, name: str):
    """The expression assigned to `name` anywhere in the module (MaxTextConfig's ici_map / dcn_map)."""
    node = next(n for n in ast.walk(module) if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == name for t in n.targets))
    return compile(ast.Expression(body=node.value), f"maxtext:{name}", "eval")


BASE = yaml.safe_load(MAXTEXT.locate_file("maxtext/configs/base.yml").read_text())
_MAX_UTILS = _source("utils/max_utils.py")
_UTILS_SCOPE: dict = {"np": np, "HYBRID_RING_64X4": "hybrid_ring_64x4", "HYBRID_RING_32X8": "hybrid_ring_32x8"}
MAX_UTILS = SimpleNamespace(
    fill_unspecified_mesh_axes=_function(_MAX_UTILS, "fill_unspecified_mesh_axes", _UTILS_SCOPE),
    is_valid_custom_mesh=_function(_MAX_UTILS, "is_valid_custom_mesh", _UTILS_SCOPE))
CREATE_DEVICE_MESH = _function(_source("utils/maxtext_utils.py"), "create_device_mesh", {
    "jax": jax, "np": np, "mesh_utils": mesh_utils, "max_utils": MAX_UTILS,
    "max_logging": SimpleNamespace(log=lambda *a, **k: None), "elastic_utils": None, "lineage_adapter": None})
_TYPES = _source("configs/types.py")
RESOLVE = _function(_TYPES, "_resolve_parallelism", {})
ICI_MAP, DCN_MAP = _dict_literal(_TYPES, "ici_map"), _dict_literal(_TYPES, "dcn_map")


@dataclasses.dataclass(frozen=True)
class FakeGpu:
    id: int
    process_index: int
    slice_index: int
    host: str
    local_gpu: int
    """The physical GPU of its host (CUDA_VISIBLE_DEVICES[ordinal])."""
    platform: str = "gpu"
    device_kind: str = "NVIDIA H100 80GB HBM3"


LAUNCH = re.compile(r"^#\s+(\S+): (?:CUDA_VISIBLE_DEVICES=(\S+) )?NODE_RANK=(\d+) ", re.M)


def launched_devices(text: str, per_host: int) -> list[FakeGpu]:
    """The devices JAX sees when each host runs its emitted launch line."""
    devices = []
    for host, visible, rank in LAUNCH.findall(text):
        k = int(rank)
        order = [int(x) for x in visible.split(",")] if visible else list(range(per_host))
        devices += [FakeGpu(k * per_host + ordinal, k, k, host, gpu) for ordinal, gpu in enumerate(order)]
    return devices


def maxtext_config(text: str, num_slices_seen: int) -> SimpleNamespace:
    """base.yml merged with the emitted overrides, with the per-axis lists MaxTextConfig derives."""
    emitted = yaml.safe_load(text)
    unknown = set(emitted) - set(BASE) - {"base_config"}
    assert not unknown, f"not MaxText 0.2.5 keys: {sorted(unknown)}"
    assert sorted(emitted["mesh_axes"]) == sorted(BASE["mesh_axes"])
    config = SimpleNamespace(**(BASE | emitted))
    assert config.num_slices == num_slices_seen  # what max_utils.get_num_slices counts when left at -1
    config.ici_parallelism = RESOLVE(None, eval(ICI_MAP, {"self": config}), config.mesh_axes)
    config.dcn_parallelism = RESOLVE(None, eval(DCN_MAP, {"self": config}), config.mesh_axes)
    return config


def placement_axes(lay) -> dict[tuple[str, ...], tuple[str, ...]]:
    """MaxText mesh axes -> the placement axes their groups must equal (the emitter's contract)."""
    hsdp = lay.zero_stage == 3 and lay.dp_shard < lay.dp
    spec = {("tensor",): ("tp",), ("context",): ("cp",), ("stage",): ("pp",)}
    if hsdp:
        spec |= {("data",): ("replicate",), ("fsdp", "expert"): ("shard",)}
    else:
        spec[("data", "fsdp", "expert")] = ("dp",)
    if lay.ep > 1 and lay.etp == lay.tp and lay.cp == 1:
        spec[("expert",)] = ("ep",)
    return spec


def rank_grid(ctx, grid: np.ndarray) -> np.ndarray:
    """Placement rank of the GPU behind each mesh entry."""
    rank_of_gpu = np.argsort(ctx.gpu_of_rank)
    host_index = {h: i for i, h in enumerate(ctx.topo.host_names)}
    gph = ctx.topo.gpus_per_host
    return np.vectorize(lambda d: rank_of_gpu[host_index[d.host] * gph + d.local_gpu])(grid)


def check_groups(ctx, axes: list[str], ranks: np.ndarray, label: str) -> None:
    assert sorted(ranks.flatten().tolist()) == list(range(ctx.plan.num_gpus))  # every rank exactly once
    for mx_axes, p_axes in placement_axes(ctx.plan.layout).items():
        idx = [axes.index(a) for a in mx_axes]
        size = math.prod(ranks.shape[i] for i in idx)
        groups = np.moveaxis(ranks, idx, list(range(-len(idx), 0))).reshape(-1, size)
        for g in groups:
            assert sorted(g.tolist()) == group_of(ctx, int(g[0]), p_axes), (label, mx_axes, g[:8])


def shuffled(ctx, seed: int = 0):
    """The same plan with hosts in another order and GPUs permuted inside every host."""
    rng = np.random.default_rng(seed)
    gph = ctx.topo.gpus_per_host
    hosts = rng.permutation(ctx.plan.num_gpus // gph)
    local = np.concatenate([rng.permutation(gph) for _ in hosts])
    return dataclasses.replace(ctx, gpu_of_rank=np.repeat(hosts, gph) * gph + local)


def expert_case() -> EmitContext:
    """MoE with etp = tp and cp = 1, the expert layout MaxText can express (not among CASES)."""
    return plan_context("mixtral-8x7b", "dgx-h100", 1024, 4096, 1024,
                        {"tp": 2, "ep": 8, "etp": 2, "cp": 1, "pp": 4})[0]


def contexts():
    for case in CASES:
        yield case, planned(case)[0]
    yield "llama3-70b-1024-shuffled", shuffled(planned("llama3-70b-1024")[0])
    yield "mixtral-8x7b-1024-ep8-etp2-shuffled", shuffled(expert_case(), seed=2)


@pytest.mark.parametrize(("label", "ctx"), list(contexts()), ids=lambda x: x if isinstance(x, str) else "")
def test_maxtext_builds_the_planned_mesh_from_the_emitted_config(label, ctx):
    text, _, extra = maxtext.render(ctx)
    gph = ctx.topo.gpus_per_host
    devices = launched_devices(text, gph)
    assert len(devices) == ctx.plan.num_gpus >= 1024
    config = maxtext_config(text, len({d.slice_index for d in devices}))
    # MaxText's fill rule, checked by its own code inside create_device_mesh as well
    assert math.prod(config.ici_parallelism) == gph and math.prod(config.dcn_parallelism) == config.num_slices
    if ctx.plan.layout.pp > 1:  # MaxText would swap them itself otherwise (types.py)
        assert config.mesh_axes.index("stage") < config.mesh_axes.index("data")
    grid = CREATE_DEVICE_MESH(config, devices)  # calls mesh_utils.create_hybrid_device_mesh(ici, dcn, devices)
    check_groups(ctx, list(config.mesh_axes), rank_grid(ctx, grid), label)

    # jax_mesh.py: the same process order and the same mesh, built with JAX directly
    scope: dict = {"__name__": "jax_mesh"}
    exec(compile(extra["jax_mesh.py"], "jax_mesh.py", "exec"), scope)
    assert scope["AXES"] == tuple(config.mesh_axes)
    assert scope["HOSTS"] == [d.host for d in devices[::gph]]
    mesh = scope["build_mesh"](devices)
    assert dict(mesh.shape) == {a: i * d for a, i, d in zip(config.mesh_axes, config.ici_parallelism,
                                                             config.dcn_parallelism, strict=True)}
    assert np.array_equal(np.vectorize(lambda d: d.id)(mesh.devices), np.vectorize(lambda d: d.id)(grid))


def test_jax_mesh_initializes_each_host_with_its_planned_process_id(monkeypatch):
    ctx = shuffled(planned("llama3-70b-1024")[0], seed=1)
    text, _, extra = maxtext.render(ctx)
    launch = {host: (visible, int(rank)) for host, visible, rank in LAUNCH.findall(text)}
    calls = []
    monkeypatch.setattr(jax.distributed, "initialize", lambda **kw: calls.append(kw))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "unset")
    scope: dict = {"__name__": "jax_mesh"}
    exec(compile(extra["jax_mesh.py"], "jax_mesh.py", "exec"), scope)
    for host in (ctx.topo.host_names[0], ctx.topo.host_names[-1]):
        assert scope["initialize"](host) == launch[host][1]
        assert calls[-1] == {"coordinator_address": f"{ctx.hosts_in_rank_order[0]}:1234",
                             "num_processes": len(launch), "process_id": launch[host][1]}
        assert os.environ["CUDA_VISIBLE_DEVICES"] == launch[host][0]
    with pytest.raises(SystemExit, match="not-a-host"):
        scope["initialize"]("not-a-host")


def test_maxtext_and_jax_reject_the_config_on_a_cluster_of_another_shape():
    ctx, _ = planned("llama3-8b-2048-ddp")
    text, _, _ = maxtext.render(ctx)
    devices = launched_devices(text, ctx.topo.gpus_per_host)
    config = maxtext_config(text, len({d.slice_index for d in devices}))
    short = devices[:-8]  # one host missing
    with pytest.raises(AssertionError, match="Number of devices per slice 7 does not match the product of the ICI"):
        CREATE_DEVICE_MESH(config, short)
    with pytest.raises(ValueError, match=re.escape("Number of slices 255 must equal the product of dcn_mesh_shape")):
        mesh_utils.create_hybrid_device_mesh(config.ici_parallelism, config.dcn_parallelism, short)


@pytest.mark.parametrize(("order", "ici", "dcn"), [
    (None, {"fsdp": -1}, {"data": -1}),  # base.yml's own mesh
    (("tensor", "data"), {"tensor": 2, "data": 4}, {"data": 4}),  # tensor outermost: ICI row-major
    (("stage", "data", "expert", "context", "tensor"), {"tensor": 2, "context": 2, "expert": 2},
     {"stage": 2, "data": 2}),
    (("data", "stage", "tensor"), {"tensor": 4, "data": 2}, {"stage": 4}),  # pp across hosts, inside dp
])
def test_the_audits_maxtext_device_numbering_is_jaxs_hybrid_mesh(order, ici, dcn):
    """`placement audit` numbers a MaxText job's devices (placement.audit.maxtext.framework_rank) exactly as
    MaxText's create_device_mesh -> JAX's create_hybrid_device_mesh places them, for any axis order."""
    from placement.audit import maxtext as reader

    gph, hosts = 8, 4
    axes = list(order or ()) + [a for a in BASE["mesh_axes"] if a not in (order or ())]
    keys = {"mesh_axes": axes, "num_slices": hosts} | {f"ici_{reader.KEY_WORD[a]}_parallelism": 1 for a in axes} | {
        f"dcn_{reader.KEY_WORD[a]}_parallelism": 1 for a in axes}
    keys |= {f"ici_{reader.KEY_WORD[a]}_parallelism": n for a, n in ici.items()}
    keys |= {f"dcn_{reader.KEY_WORD[a]}_parallelism": n for a, n in dcn.items()}
    config = SimpleNamespace(**(BASE | keys))
    config.ici_parallelism = RESOLVE(None, eval(ICI_MAP, {"self": config}), config.mesh_axes)
    config.dcn_parallelism = RESOLVE(None, eval(DCN_MAP, {"self": config}), config.mesh_axes)
    devices = [FakeGpu(k * gph + g, k, k, f"h{k}", g) for k in range(hosts) for g in range(gph)]
    grid = CREATE_DEVICE_MESH(config, devices)
    mesh = {"axes": axes, "ici": {a: keys[f"ici_{reader.KEY_WORD[a]}_parallelism"] for a in axes},
            "dcn": {a: keys[f"dcn_{reader.KEY_WORD[a]}_parallelism"] for a in axes}, "num_slices": hosts}
    size = dict(zip(axes, grid.shape, strict=True))
    tp, cp, pp, ep = size["tensor"], size["context"], size["stage"], size["expert"]
    dp = size["data"] * size["fsdp"] * ep
    device_of_rank = reader.framework_rank(mesh, tp, cp, dp, pp, ep, gph, gph * hosts)
    for index in np.ndindex(grid.shape):  # placement's rank of each mesh position: tp, cp, dp (ep inner), pp
        c = dict(zip(axes, index, strict=True))
        d = (c["data"] * size["fsdp"] + c["fsdp"]) * ep + c["expert"]
        rank = c["tensor"] + tp * (c["context"] + cp * (d + dp * c["stage"]))
        assert device_of_rank[rank] == grid[index].id, (order, index)


@pytest.mark.parametrize("catalog", sorted(maxtext.MODELS))
def test_each_model_config_named_has_the_catalog_models_dimensions(catalog):
    """The emitter names MaxText's own config of a catalog model (model_name): the wheel's config trains the
    catalog's dimensions, but for the vocabularies the emitter warns about (MODEL_VOCABULARY)."""
    from placement.catalog import load_model

    name, dense = maxtext.MODELS[catalog]
    cfg = yaml.safe_load(MAXTEXT.locate_file(f"maxtext/configs/models/{name}.yml").read_text())
    m = load_model(catalog)
    want = {"base_emb_dim": m.hidden_size, "base_num_decoder_layers": m.num_layers,
            "base_num_query_heads": m.num_attention_heads, "first_num_dense_layers": dense,
            "vocab_size": maxtext.MODEL_VOCABULARY.get(catalog, m.vocab_size)}
    if m.moe is not None:
        want |= {"num_experts": m.moe.num_experts, "num_experts_per_tok": m.moe.top_k,
                 "base_moe_mlp_dim": m.moe.expert_ffn_hidden_size}
    got = {k: cfg.get(k, BASE.get(k)) for k in want}
    assert got == want
