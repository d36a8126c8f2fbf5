"""What `placement calibrate` prints: the fitted constants, the residuals before and after, the leave-one-out
errors, as a text table, as JSON, and as an HTML page (matplotlib figures inlined as SVG; the page is built as
an element tree, not by pasting strings of markup)."""

from __future__ import annotations

import io
import textwrap
import xml.etree.ElementTree as ET
from collections import defaultdict

import numpy as np

from placement.calibration.profile import CalibrationProfile


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if abs(v) >= 1e-3 else f"{v:.3e}"


def _err(pred: float, measured: float) -> float:
    return (pred - measured) / measured


def _groups(profile: CalibrationProfile) -> dict[str, list]:
    """Residuals grouped by input (an nccl-tests file's rows together)."""
    out: dict[str, list] = defaultdict(list)
    for r in profile.measurements:
        out[f"{r.kind}: {r.group or r.measurement}"].append(r)
    return out


REGIMES = (("latency", "latency-bound rows"), ("bandwidth", "bandwidth-bound rows"), ("mixed", "rows between"))


def regime_errors(profile: CalibrationProfile) -> list[dict]:
    """For each nccl-tests file and class of rows (latency-bound, bandwidth-bound, between): rows, sizes and
    mean |error| before and after the fit."""
    out = []
    for key, rows in _groups(profile).items():
        for regime, _ in REGIMES:
            sel = [r for r in rows if r.regime == regime]
            if not sel:
                continue
            out.append({"group": key, "regime": regime, "rows": len(sel),
                        "error_before": float(np.mean([abs(_err(r.before, r.measured)) for r in sel])),
                        "error_after": float(np.mean([abs(_err(r.after, r.measured)) for r in sel]))})
    return out


def calibrate_json(profile: CalibrationProfile) -> dict:
    """The fitted constants with their defaults and uncertainties, and the per-measurement residuals."""
    data = profile.model_dump(mode="json")
    data["regime_errors"] = regime_errors(profile)
    for row in data["measurements"]:
        row["error_before"] = _err(row["before"], row["measured"])
        row["error_after"] = _err(row["after"], row["measured"])
    for row in data["leave_one_out"]:
        row["error_before"] = _err(row["before"], row["measured"])
        row["error_held_out"] = _err(row["held_out"], row["measured"])
    return data


NOTE_WIDTH = 90
"""Characters of a constant's note per line of the text table (the rest wraps under it)."""


def calibrate_table(profile: CalibrationProfile, out_path: str) -> str:
    lines = [f"calibration of {profile.cluster} ({profile.accelerator}) from {len(profile.inputs)} file(s); "
             f"profile written to {out_path}", "",
             f"{'constant':<26} {'default':>10} {'fitted':>10} {'+/-':>10}  note"]
    for name, c in profile.constants.items():
        fitted = _fmt(c.value) if c.identified else "-"
        head = f"{name:<26} {_fmt(c.default):>10} {fitted:>10} {_fmt(c.stderr):>10}  "
        # the whole note, wrapped under its column (a user trial: cut at 90 characters, mid-word, the reason lost)
        note = textwrap.wrap(c.note, width=NOTE_WIDTH, break_long_words=False, break_on_hyphens=False) or [""]
        lines += [head + note[0], *(" " * len(head) + more for more in note[1:])]
    lines += ["", f"{'measurements':<70} {'n':>4} {'mean |err| before':>18} {'after':>7}"]
    for key, rows in _groups(profile).items():
        before = np.mean([abs(_err(r.before, r.measured)) for r in rows])
        after = np.mean([abs(_err(r.after, r.measured)) for r in rows])
        label = key if len(key) <= 70 else key[:67] + "..."
        lines.append(f"{label:<70} {len(rows):>4} {before:>17.1%} {after:>7.1%}")
        for regime, words in REGIMES:
            sel = [r for r in rows if r.regime == regime]
            if sel:
                b = np.mean([abs(_err(r.before, r.measured)) for r in sel])
                a = np.mean([abs(_err(r.after, r.measured)) for r in sel])
                lines.append(f"{'  ' + words:<70} {len(sel):>4} {b:>17.1%} {a:>7.1%}")
    if profile.leave_one_out:
        lines += ["", "leave-one-out (each step run predicted from a fit on the others):",
                  f"{'run':<60} {'measured s':>11} {'default':>8} {'held out':>9}"]
        for h in profile.leave_one_out:
            label = h.measurement if len(h.measurement) <= 60 else h.measurement[:57] + "..."
            lines.append(f"{label:<60} {h.measured:>11.3f} {_err(h.before, h.measured):>+8.1%} "
                         f"{_err(h.held_out, h.measured):>+9.1%}")
        b = np.mean([abs(_err(h.before, h.measured)) for h in profile.leave_one_out])
        a = np.mean([abs(_err(h.held_out, h.measured)) for h in profile.leave_one_out])
        lines.append(f"{'mean |error|':<60} {'':>11} {b:>8.1%} {a:>9.1%}")
    for w in profile.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def _svg(fig) -> ET.Element:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    return ET.fromstring(text[text.index("<svg"):])


def calibrate_html(profile: CalibrationProfile) -> str:
    """One page: the constants table, measured against predicted before and after (one figure per input
    kind), and the leave-one-out table."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ET.register_namespace("", "http://www.w3.org/2000/svg")
    html = ET.Element("html", lang="en")
    head = ET.SubElement(html, "head")
    ET.SubElement(head, "meta", charset="utf-8")
    ET.SubElement(head, "title").text = f"placement calibrate: {profile.cluster}"
    body = ET.SubElement(html, "body")
    ET.SubElement(body, "h1").text = f"Calibration of {profile.cluster} ({profile.accelerator})"
    ET.SubElement(body, "p").text = (f"placement {profile.placement_version}; inputs: " + ", ".join(profile.inputs))
    table = ET.SubElement(body, "table", border="1")
    head_row = ET.SubElement(table, "tr")
    for h in ("constant", "default", "fitted", "std. error", "unit", "note"):
        ET.SubElement(head_row, "th").text = h
    for name, c in profile.constants.items():
        row = ET.SubElement(table, "tr")
        for v in (name, _fmt(c.default), _fmt(c.value) if c.identified else "not identified", _fmt(c.stderr),
                  c.unit, c.note):
            ET.SubElement(row, "td").text = v
    for kind, title in (("nccl", "Collectives: measured and predicted time per size"),
                        ("gemm", "GEMMs: predicted against measured time"),
                        ("step", "Steps: predicted against measured")):
        rows = [r for r in profile.measurements if r.kind == kind]
        if not rows:
            continue
        ET.SubElement(body, "h2").text = title
        fig, ax = plt.subplots(figsize=(7, 4.5))
        measured = np.array([r.measured for r in rows])
        for attr, marker, label in (("before", "x", "default constants"), ("after", "o", "calibrated")):
            pred = np.array([getattr(r, attr) for r in rows])
            ax.scatter(measured, pred, marker=marker, label=label, alpha=0.8)
        lo, hi = measured.min() * 0.8, measured.max() * 1.25
        ax.plot([lo, hi], [lo, hi], color="grey", linewidth=1, label="predicted = measured")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured (s)")
        ax.set_ylabel("predicted (s)")
        ax.legend()
        body.append(_svg(fig))
        plt.close(fig)
        errors = ET.SubElement(body, "table", border="1")
        hdr = ET.SubElement(errors, "tr")
        for h in ("measurements", "n", "mean |error| before", "after"):
            ET.SubElement(hdr, "th").text = h
        for key, group in _groups(profile).items():
            if not key.startswith(kind):
                continue
            row = ET.SubElement(errors, "tr")
            for v in (key, str(len(group)), f"{np.mean([abs(_err(r.before, r.measured)) for r in group]):.1%}",
                      f"{np.mean([abs(_err(r.after, r.measured)) for r in group]):.1%}"):
                ET.SubElement(row, "td").text = v
    if profile.leave_one_out:
        ET.SubElement(body, "h2").text = "Leave-one-out"
        loo = ET.SubElement(body, "table", border="1")
        hdr = ET.SubElement(loo, "tr")
        for h in ("run", "measured s", "error, default", "error, held out"):
            ET.SubElement(hdr, "th").text = h
        for h in profile.leave_one_out:
            row = ET.SubElement(loo, "tr")
            for v in (h.measurement, f"{h.measured:.3f}", f"{_err(h.before, h.measured):+.1%}",
                      f"{_err(h.held_out, h.measured):+.1%}"):
                ET.SubElement(row, "td").text = v
    if profile.warnings:
        ET.SubElement(body, "h2").text = "Warnings"
        ul = ET.SubElement(body, "ul")
        for w in profile.warnings:
            ET.SubElement(ul, "li").text = w
    return "<!DOCTYPE html>\n" + ET.tostring(html, encoding="unicode", method="html")
