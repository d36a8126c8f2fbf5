"""The README's screenshots of the --report pages (`make report-screenshots`), never taken by hand.

Runs `plan`, `audit` and `sweep` with --reproducible and --report on the inputs in tests/data/report, opens each
page in Debian's headless Chromium (placement.html.chromium) and writes docs/report-plan.png,
docs/report-audit.png and docs/report-sweep.png.  Stops with a message if a page logs an error.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main
from placement.html.chromium import find_chromium, load_page

ROOT = Path(__file__).resolve().parent.parent
DATA = Path("tests") / "data"  # relative to ROOT, where main_ runs: the pages quote these paths, not this machine's
REPORT = DATA / "report"
WIDTH = 1200
PAGES = {
    # page: (command line, height of the screenshot at most, in pixels)
    "plan": (["plan", "--model", "mixtral-8x7b", "--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"),
              "--nodelist", f"@{REPORT / 'hosts-3leaves.txt'}", "--node-type", "dgx-h100", "--oversubscription", "2",
              "--seq-len", "4096", "--global-batch", "160"], 2600),
    "audit": (["audit", "--launch", str(REPORT / "megatron_tp16.sh"), "--model", "llama3-70b", "--cluster",
               "dgx-h100"], 2200),
    "sweep": (["sweep", str(REPORT / "small_sweep.yaml"), "--workers", "1"], 2000),
}


def main_() -> int:
    os.chdir(ROOT)
    if find_chromium() is None:
        print("report_screenshots: no Chromium (Debian: apt-get install chromium)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        for name, (args, max_height) in PAGES.items():
            page = Path(tmp) / f"{name}.html"
            extra = ["--out", str(Path(tmp) / "sweep")] if name == "sweep" else []
            result = CliRunner().invoke(main, ["--reproducible", *args, *extra, "--report", str(page)])
            if result.exit_code not in (0, 1) or not page.exists():
                print(f"report_screenshots: {name}: exit {result.exit_code}: {result.stderr}", file=sys.stderr)
                return 1
            shot = load_page(page, width=WIDTH, height=900, screenshot=True, full_page=True, max_height=max_height)
            if shot.errors:
                print(f"report_screenshots: {name}: the page logged errors: {shot.errors}", file=sys.stderr)
                return 1
            out = ROOT / "docs" / f"report-{name}.png"
            out.write_bytes(shot.screenshot_png)
            print(f"wrote {out.relative_to(ROOT)} ({len(shot.screenshot_png) // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main_())
