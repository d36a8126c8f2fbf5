"""Error bands: how far `placement validate` finds the model off on the calibration runs nearest a cell.

A cell's band comes from the validate errors of its calibration group: dense or MoE by the workload's
model, and the accelerator family of the design (Ampere, Hopper, Blackwell); a family with no runs of that
kind takes the nearest family that has some (by generation), and says so.  The errors are the current
code's: `validate` runs once per code version (a digest of the package source and the calibration runs,
~3 s) and its errors are cached in the sweep cache under that digest, so a change to the cost model
refreshes them and a re-price does not pay for them.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from placement.outfiles import checked_dump, checked_load, write_atomic

FAMILIES = (("Ampere", ("a100",)), ("Hopper", ("h100", "h200", "h800")), ("Blackwell", ("b200", "gb200", "gb300")))
"""Accelerator families by generation; an accelerator belongs to the family whose prefix its name starts with."""


def family(accelerator: str) -> str | None:
    for name, prefixes in FAMILIES:
        if accelerator.startswith(prefixes):
            return name
    return None


@lru_cache(maxsize=1)
def code_digest() -> str:
    """Digest of the package's Python source (read once per process): the digest below, which the sweep's cell
    fingerprints and the validate errors key on, starts from it."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


@lru_cache(maxsize=1)
def data_digest() -> str:
    """The package source, the calibration runs and the catalogs: what validate's errors depend on, and a sweep cell's
    cached plans too (each plan's `published_best`, which anchors the cell's band, is read from the calibration
    runs)."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256(code_digest().encode())
    for path in sorted((root / "calibration").glob("*.yaml")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    from placement.catalog import catalog_root

    for sub in ("models", "hardware/clusters", "hardware/accelerators"):
        for path in sorted((catalog_root() / sub).glob("*.yaml")):
            h.update(path.name.encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


@lru_cache(maxsize=4)
def _validate_errors(digest: str) -> tuple[dict, ...]:
    from placement.calibration.validate import MOE_GROUP, validate
    from placement.catalog import load_cluster

    out = []
    for r in validate():
        if r.error is None:
            continue
        out.append({"id": r.run.id, "moe": r.run.group == MOE_GROUP,
                    "accelerator": load_cluster(r.run.cluster).accelerator, "precision": r.run.precision.value,
                    "error": r.error})
    return tuple(out)


def validate_errors(cache_dir: Path | None) -> tuple[str, tuple[dict, ...], bool]:
    """(code digest, every validate row's error, whether it came from the cache).  Cached in `cache_dir` under the
    digest; an unreadable entry is recomputed."""
    digest = data_digest()
    path = None if cache_dir is None else cache_dir / f"{digest}.json"
    if path is not None and path.is_file():
        try:
            value = checked_load(path.read_text(errors="replace"))
        except OSError:
            value = None
        if isinstance(value, list) and all(isinstance(v, dict)
                                           and {"id", "moe", "accelerator", "precision", "error"} <= v.keys()
                                           for v in value):
            return digest, tuple(value), True
    rows = _validate_errors(digest)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, checked_dump(list(rows)))
        except OSError:
            pass  # a cache must never break a study
    return digest, rows, False


def band(rows: tuple[dict, ...], moe: bool, accelerator: str, digest: str, precision: str | None = None) -> dict | None:
    """The error band for a cell: the group's errors (predicted/published - 1), widened to include 0.  Within a
    family the runs at the cell's `precision` make the band where there are some; where the family has runs at
    another precision only, those do together with the runs at the cell's precision in the nearest family that has
    some, and `note` says so (the dense Blackwell rows are FP8: a BF16 cell's band comes from them and the BF16 dense
    Hopper rows, and says it)."""
    kind = "MoE" if moe else "dense"
    mine = [r for r in rows if r["moe"] == moe]
    fam = family(accelerator)
    names = [f for f, _ in FAMILIES]
    order = sorted(names, key=lambda f: (abs(names.index(f) - names.index(fam)), -names.index(f))) if fam else []
    chosen, note = None, ""
    for f in order:
        group = [r for r in mine if family(r["accelerator"]) == f]
        if group:
            same = [r for r in group if precision is None or r.get("precision") == precision]
            notes = [] if f == fam else [f"no {kind} {fam} runs in validate; nearest family {f}"]
            widen = []
            if not same:
                others = "/".join(sorted({str(r.get("precision")) for r in group}))
                # the family's constants were measured only at another precision, this precision's pricing only on
                # other hardware: both sets of errors bound the cell (a user trial: a BF16 B200 band of -5/+4 %
                # from FP8 rows, narrower than the BF16 H100 one, decided H100 vs B200)
                nearest = next((g for g in order if g != f and any(
                    family(r["accelerator"]) == g and r.get("precision") == precision for r in mine)), None)
                widen = [r for r in mine if family(r["accelerator"]) == nearest and r.get("precision") == precision]
                notes.append(f"no {precision} {kind} {f} runs in validate; its {others} runs"
                             + (f", with the {precision} {kind} {nearest} runs" if widen else ""))
            chosen = (f, (same or group) + widen)
            note = "; ".join(notes)
            break
    if chosen is None:
        if not mine:
            return None
        chosen = ("every family", mine)
        note = f"{accelerator} is in no family with validate runs; all {kind} runs"
    f, group = chosen
    errors = [r["error"] for r in group]
    return {"group": f"{kind} / {f}", "num_rows": len(group), "error_low": min(min(errors), 0.0),
            "error_high": max(max(errors), 0.0), "accelerators": sorted({r["accelerator"] for r in group}),
            "source": f"placement validate, code {digest}", "note": note}
