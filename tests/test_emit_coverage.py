"""Every recipe field, for every emitter: stated in its files, re-priced as the framework runs it (RUNS_INSTEAD at
the field's default, FORCED at the framework's one value), the job's own to set (a launcher placement does not
write), or no launch setting at all (emit.common.NOT_SETTINGS).  A field added to the Recipe without a place here
would let a header price what its file does not run."""

from __future__ import annotations

import ast
import inspect
import re

import pytest
from click.testing import CliRunner

from placement.cli import main
from placement.emit import common, deepspeed, devicemesh, maxtext, megatron, torchtitan
from placement.specs.recipe import Recipe

EMITTERS = {"megatron": megatron, "torchtitan": torchtitan, "deepspeed": deepspeed, "maxtext": maxtext,
            "devicemesh": devicemesh}


def _classes(mod) -> dict[str, set[str]]:
    return {"stated": set(getattr(mod, "STATED", ())), "runs instead": set(mod.RUNS_INSTEAD),
            "forced": set(getattr(mod, "FORCED", ())), "yours": set(getattr(mod, "YOURS", ())),
            "not a setting": set(common.NOT_SETTINGS)}


@pytest.mark.parametrize("name", list(EMITTERS))
def test_every_recipe_field_has_one_place_in_every_emitter(name):
    classes = _classes(EMITTERS[name])
    fields = set(Recipe.model_fields)
    for field in sorted(fields):
        where = [k for k, v in classes.items() if field in v]
        assert where, f"{name}: recipe field {field} is neither stated, re-priced, the job's, nor not a setting"
        assert len([k for k in where if k != "not a setting"]) <= 1, f"{name}: {field} is in {where}"
    for kind, names in classes.items():
        assert names <= fields, f"{name} {kind}: {sorted(names - fields)} are not recipe fields"


def _code(obj) -> str:
    """The source of a module or function without its docstrings and comments (ast.unparse drops comments), and
    without its own STATED table."""
    tree = ast.parse(inspect.getsource(obj))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(
                getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
            body[0] = ast.Pass()
    tree.body = [n for n in tree.body if not (isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "STATED" for t in n.targets))]
    return ast.unparse(tree)


@pytest.mark.parametrize("name", list(EMITTERS))
def test_stated_fields_are_read_by_the_emitter(name):
    """A STATED field is read in the code that writes the files: the emitter's own, or the torchrun lines it
    calls (docstrings, comments and the STATED table itself do not count)."""
    mod = EMITTERS[name]
    code = _code(mod)
    if "torchrun_lines" in code:
        code += _code(common.torchrun_lines) + _code(common.numa_binding)
    for field in getattr(mod, "STATED", ()):
        assert re.search(rf"\b{field}\b", code), f"{name} never reads {field}"


def _emit(tmp_path, *extra: str) -> None:
    result = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--gpus", "16", "--seq-len", "4096",
                                       "--global-batch", "64", "--top-k", "1", "--out", str(tmp_path),
                                       "--emit", "megatron,torchtitan,deepspeed", *extra])
    assert result.exit_code == 0, result.output


def test_bound_processes_are_launched_bound(tmp_path):
    """cpu_affinity (the default) is what the launch lines run: torchrun --numa-binding node (the DeepSpeed
    launcher's binding: tests/test_emit_deepspeed.py); without it no binding."""
    _emit(tmp_path / "bound")
    for name in ("megatron.sh", "torchtitan.sh", "launch.sbatch"):
        lines = [x for x in (tmp_path / "bound" / name).read_text().splitlines() if "torchrun --nnodes" in x]
        assert lines and all("--numa-binding node " in x for x in lines), name
    _emit(tmp_path / "unbound", "--no-cpu-affinity")
    for name in ("megatron.sh", "torchtitan.sh", "launch.sbatch", "deepspeed.sh"):
        text = (tmp_path / "unbound" / name).read_text()
        assert "--numa-binding" not in text and "--bind_cores_to_rank" not in text, name


def test_a_megatron_file_prices_the_1f1b_it_runs_for_a_zero_bubble_plan(tmp_path):
    """Megatron-Core has no argument for a zero-bubble schedule: the file runs 1F1B and its header says both."""
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-70b", "--gpus", "64", "--seq-len", "4096",
                                       "--global-batch", "64", "--tp", "8", "--pp", "4", "--mbs", "1",
                                       "--pipeline-schedule", "zero_bubble", "--out", str(tmp_path),
                                       "--emit", "megatron"])
    assert result.exit_code == 0, result.output
    runs = re.search(r"^# this file runs (.*?): ([\d.]+) s/step \(\+", (tmp_path / "megatron.sh").read_text(), re.M)
    assert runs is not None and "pipeline_schedule 1f1b (not zero_bubble)" in runs.group(1)
