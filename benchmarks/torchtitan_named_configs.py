"""Regenerate placement/audit/readers/torchtitan_configs.py: what each torchtitan 0.3.0 named config sets.

torchtitan 0.3.0 has no TOML: `--module M --config F` calls the function F of models/M/config_registry.py (config/
manager.py ConfigManager._load_config), whose Trainer.Config is the default tyro parses the `--section.key` flags
over, so a key the line leaves is the function's value, else the dataclass default.  The audit does not run that
code.  This script reads each config_registry.py with `ast` (nothing is imported or run) and follows each function
that returns a Trainer.Config: `Trainer.Config(training=TrainingConfig(...), parallelism=ParallelismConfig(...),
compile=CompileConfig(...), activation_checkpoint=FullAC.Config(), model_spec=model_registry(flavor, ...))`, a call
of another config function (`config = llama3_8b()`, `return _gpt_oss_debugmodel(attn_backend="flex")`), and the
assignments after it (`config.training.disable_cuda_graphs = True`; `config.compile = CompileConfig(...)` replaces
the whole section, its other keys back to their defaults).  For each function it writes the keys of the training,
parallelism, compile and activation_checkpoint sections set (activation_checkpoint.mode from the policy class:
SelectiveAC selective, FullAC full, MemoryBudgetAC memory_budget, None none) and of model_registry's call
(model.flavor, model.converters as the converter classes, its other constant arguments), each with the function
and line that set it; and the 0.3.0 defaults of those sections (config/configs.py dataclasses; trainer.py
Trainer.Config.activation_checkpoint).  A statement it cannot follow that could set one of those keys stops it
(no table rather than a wrong one).  Only names and values are kept (facts, no code).

    python benchmarks/torchtitan_named_configs.py UNPACKED_0.3.0_WHEEL_DIR [WHEEL_FILE]
"""

from __future__ import annotations

import ast
import copy
import hashlib
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "placement" / "audit" / "readers" / "torchtitan_configs.py"
SECTIONS = {"TrainingConfig": "training", "ParallelismConfig": "parallelism", "CompileConfig": "compile"}
"""config/configs.py dataclass -> the Trainer.Config field that holds it."""
AC_MODES = {"SelectiveAC": "selective", "FullAC": "full", "MemoryBudgetAC": "memory_budget"}
"""distributed/activation_checkpoint.py policy -> its tyro subcommand (ActivationCheckpointingConfig, `-` as `_`)."""
KEPT = (*SECTIONS.values(), "activation_checkpoint", "model_spec")
"""Trainer.Config fields read; assigning another (loss, optimizer, ...) sets nothing the audit prices."""


class Unfollowed(Exception):
    """A statement the script cannot follow that could set a key it reads."""


def dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return ""


def constant(node: ast.expr, env: dict, where: str):
    """A literal (or a name bound to one); Unfollowed otherwise."""
    if isinstance(node, ast.Name) and node.id in env and not isinstance(env[node.id], dict):
        return env[node.id]
    try:
        value = ast.literal_eval(node)
    except ValueError:
        raise Unfollowed(f"{where}: {ast.unparse(node)} is no constant") from None
    return tuple(value) if isinstance(value, list) else value


class Registry:
    """The config functions of one config_registry.py and what each sets: key -> (value, function, line)."""

    def __init__(self, module: str, text: str):
        self.module = module
        self.functions = {n.name: n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)}
        self.configs = [n for n, f in self.functions.items()
                        if f.returns is not None and ast.unparse(f.returns).endswith("Trainer.Config")]

    def facts(self, name: str, args: dict | None = None) -> dict[str, tuple]:
        fn = self.functions[name]
        env: dict = {}
        params = fn.args.args + fn.args.kwonlyargs
        defaults = [None] * (len(fn.args.args) - len(fn.args.defaults)) + fn.args.defaults + fn.args.kw_defaults
        for p, d in zip(params, defaults, strict=True):
            if args and p.arg in args:
                env[p.arg] = args[p.arg]
            elif d is not None:
                env[p.arg] = constant(d, env, f"{name}({p.arg})")
        for stmt in fn.body:
            out = self.statement(name, stmt, env)
            if out is not None:
                return out
        raise Unfollowed(f"{name}: no return of a Trainer.Config")

    def statement(self, fn: str, stmt: ast.stmt, env: dict) -> dict | None:
        """Follow one top-level statement of config function `fn`; the facts where it returns."""
        where = f"models/{self.module}/config_registry.py:{stmt.lineno} {fn}"
        if isinstance(stmt, ast.Return):
            return self.value(fn, stmt.value, env, where)
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                env[target.id] = self.value(fn, stmt.value, env, where, strict=False)
                return None
            path = dotted(target).split(".")
            if path[0] in env and isinstance(env[path[0]], dict) and len(path) > 1:
                self.assign(fn, env[path[0]], path[1:], stmt.value, env, where)
                return None
        if isinstance(stmt, (ast.Expr, ast.Assert, ast.FunctionDef)) or (
                isinstance(stmt, ast.Assign) and not _touches(stmt, env)):
            return None  # a helper call (enable_fused_swiglu: override imports), a check, a nested function
        if _touches(stmt, env):
            raise Unfollowed(f"{where}: {ast.unparse(stmt)[:80]}")
        return None

    def value(self, fn: str, node: ast.expr | None, env: dict, where: str, strict: bool = True):
        """A Trainer.Config's facts (dict), a section's or a model spec's (dict), a constant, or None where not
        followed (strict: Unfollowed)."""
        if isinstance(node, ast.Name) and node.id in env:
            return copy.deepcopy(env[node.id])
        if isinstance(node, ast.Call):
            head = dotted(node.func)
            short = head.rsplit(".", 1)[-1]
            if head in self.functions and head in self.configs:
                args = {k.arg: constant(k.value, env, where) for k in node.keywords}
                return self.facts(head, args)
            if head.endswith("Trainer.Config") or head == "_KimiTrainerConfig":
                facts: dict = {}
                for k in node.keywords:
                    if k.arg in KEPT:
                        self.assign(fn, facts, [k.arg], k.value, env, where)
                return facts
            if short in SECTIONS or head == "model_registry":
                return self.section(fn, node, env, where)
        if not strict:
            try:
                return constant(node, env, where)
            except Unfollowed:
                return None
        raise Unfollowed(f"{where}: {ast.unparse(node)[:80] if node else 'return'}")

    def section(self, fn: str, call: ast.Call, env: dict, where: str) -> dict:
        """{key: (value, fn, line)} of a section dataclass call, or of model_registry(flavor, ...)."""
        line = call.lineno
        if dotted(call.func) == "model_registry":
            out = {"flavor": (constant(call.args[0], env, where), fn, line)}
            for k in call.keywords:
                if k.arg == "converters":
                    names = [dotted(e.func).removesuffix(".Config") for e in k.value.elts]  # type: ignore[attr-defined]
                    out["converters"] = (tuple(names), fn, k.value.lineno)
                else:
                    try:
                        out[k.arg] = (constant(k.value, env, where), fn, k.value.lineno)
                    except Unfollowed:
                        continue  # e.g. a converter's model_compile_enabled expression
            return out
        return {k.arg: (constant(k.value, env, f"{where} {k.arg}"), fn, k.value.lineno) for k in call.keywords}

    def assign(self, fn: str, facts: dict, path: list[str], node: ast.expr, env: dict, where: str) -> None:
        """`facts`'s keys after `config.<path> = node` (a whole field replaced, or one key of it)."""
        field = path[0]
        if field not in KEPT:
            return
        prefix = "model" if field == "model_spec" else field
        if len(path) == 2:
            facts[f"{prefix}.{path[1]}"] = (constant(node, env, where), fn, node.lineno)
            return
        if len(path) > 2:
            raise Unfollowed(f"{where}: config.{'.'.join(path)}")
        for key in [k for k in facts if k.split(".")[0] == prefix]:  # the whole field replaced: defaults again
            del facts[key]
        if field == "activation_checkpoint":
            if isinstance(node, ast.Constant) and node.value is None:
                facts["activation_checkpoint.mode"] = ("none", fn, node.lineno)
                return
            policy = dotted(node.func).removesuffix(".Config") if isinstance(node, ast.Call) else ""
            if policy not in AC_MODES:
                raise Unfollowed(f"{where}: activation_checkpoint {ast.unparse(node)[:60]}")
            facts["activation_checkpoint.mode"] = (AC_MODES[policy], fn, node.lineno)
            for k in node.keywords:  # type: ignore[union-attr]
                facts[f"activation_checkpoint.{k.arg}"] = (constant(k.value, env, where), fn, k.value.lineno)
            return
        got = self.value(fn, node, env, where)
        if not isinstance(got, dict):
            raise Unfollowed(f"{where}: config.{field} = {ast.unparse(node)[:60]}")
        facts |= {f"{prefix}.{k}": v for k, v in got.items()}


def _touches(stmt: ast.stmt, env: dict) -> bool:
    """The statement assigns to an attribute of a config held in `env`."""
    for node in ast.walk(stmt):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        if any(isinstance(t, ast.Attribute) and dotted(t).split(".")[0] in env for t in targets):
            return True
    return False


def defaults(package: Path) -> dict[str, tuple]:
    """0.3.0's default of each key of the sections read: key -> (value, file:line)."""
    out: dict[str, tuple] = {}
    tree = ast.parse((package / "config" / "configs.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in SECTIONS:
            for s in node.body:
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is not None:
                    v = s.value
                    if isinstance(v, ast.Call) and dotted(v.func) == "field":  # field(default_factory=lambda: [...])
                        v = next(k.value for k in v.keywords if k.arg in ("default", "default_factory"))
                        v = v.body if isinstance(v, ast.Lambda) else v
                    try:
                        value = ast.literal_eval(v)
                    except ValueError:
                        continue
                    out[f"{SECTIONS[node.name]}.{s.target.id}"] = (
                        tuple(value) if isinstance(value, list) else value, f"config/configs.py:{s.lineno}")
    trainer = (package / "trainer.py").read_text()
    for n, line in enumerate(trainer.splitlines(), 1):
        if line.strip().startswith("activation_checkpoint: ActivationCheckpointingConfig"):
            policy = trainer.splitlines()[n].strip().removeprefix("default_factory=").removesuffix(".Config")
            out["activation_checkpoint.mode"] = (AC_MODES[policy], f"trainer.py:{n + 1}")
    return dict(sorted(out.items()))


def main(wheel_dir: str, wheel: str | None = None, out: Path = OUT) -> None:
    package = Path(wheel_dir) / "torchtitan"
    table: dict[str, dict[str, dict[str, tuple]]] = {}
    for path in sorted((package / "models").glob("*/config_registry.py")):
        reg = Registry(path.parent.name, path.read_text())
        table[reg.module] = {name: dict(sorted(reg.facts(name).items())) for name in sorted(reg.configs)}
    rows = []
    for module, configs in table.items():
        rows.append(f'    "{module}": {{')
        for name, facts in configs.items():
            rows.append(f'        "{name}": {{')
            for k, (v, f, line) in facts.items():
                row = f'            "{k}": ({v!r}, "{f}", {line}),'
                rows.append(row if len(row) <= 120 else f'            "{k}": (\n                {v!r}, "{f}", {line}),')
            rows.append("        },")
        rows.append("    },")
    digest = hashlib.sha256(Path(wheel).read_bytes()).hexdigest() if wheel else None
    about = textwrap.fill(
        f"Read with `ast` from models/*/config_registry.py of the torchtitan 0.3.0 wheel"
        f"{f' (torchtitan-0.3.0-py3-none-any.whl, sha256 {digest})' if digest else ''}: each function returning a "
        f"Trainer.Config, followed through the config functions it calls and the assignments after them (a section "
        f"assigned whole, `config.compile = CompileConfig(...)`, drops the keys it had).  Keys of the training, "
        f"parallelism, compile and activation_checkpoint sections (activation_checkpoint.mode from the policy "
        f"class) and of its model_registry call (model.flavor, model.converters: the converter classes); a key "
        f"not listed is the 0.3.0 default (DEFAULTS).",
        width=116, break_on_hyphens=False, break_long_words=False)
    dflt = [f'    "{k}": ({v!r}, "{w}"),' for k, (v, w) in defaults(package).items()]
    text = f'''"""What each torchtitan 0.3.0 named config (`--module M --config F`) sets of the keys the audit reads
(generated by benchmarks/torchtitan_named_configs.py; do not edit by hand).

{about}
"""

from __future__ import annotations

CONFIGS: dict[str, dict[str, dict[str, tuple]]] = {{
{chr(10).join(rows)}
}}
"""--module -> --config -> dotted key -> (value, the config function that sets it, its line in
models/<module>/config_registry.py)."""

DEFAULTS: dict[str, tuple] = {{
{chr(10).join(dflt)}
}}
"""Dotted key -> (torchtitan 0.3.0's default, file:line): a named config leaves it so."""
'''
    out.write_text(text)
    print(f"wrote {out}: {sum(map(len, table.values()))} configs of {len(table)} modules", file=sys.stderr)


if __name__ == "__main__":
    main(*(sys.argv[1:] or ["/tmp/trial/tt/src", "/tmp/trial/tt/torchtitan-0.3.0-py3-none-any.whl"]))
