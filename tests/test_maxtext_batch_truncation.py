"""MaxText 0.2.5 trains int(devices x per_device_batch_size) x gradient_accumulation_steps sequences, in float
arithmetic (configs/types.py:4438-4447 calculate_global_batch_sizes).  A QA round: 468 sequences on 216 GPUs wrote
per_device_batch_size 2.1666666666666665 (the nearest float to 13/6), whose product is 467.99999999999994, so MaxText
trained 467 while the header promised 468 and only warned it "may" differ; and the audit refused the file as "= 468,
not a whole number".  The emitter now writes the float MaxText turns into the planned batch (checked here with
MaxText's own function, read from the installed wheel), and the audit reads a file back as the batch MaxText trains."""

from __future__ import annotations

import ast
import re

import pytest
import yaml
from click.testing import CliRunner

from placement.audit.maxtext import exact_per_device, trained_batch
from placement.cli import main
from placement.emit import maxtext
from tests.maxtext_wheel import wheel_text

JOB = ["--model", "gpt3-175b", "--cluster", "dgx-h100", "--gpus", "216", "--seq-len", "2052"]
PLAN = ["--global-batch", "468", "--tp", "6", "--mbs", "13", "--zero", "3", "--recompute", "full"]


def maxtext_batch_sizes():
    """calculate_global_batch_sizes as MaxText 0.2.5 defines it (a function inside MaxTextConfig's validator), taken
    from the wheel's configs/types.py and compiled on its own: it uses nothing but int()."""
    tree = ast.parse(wheel_text("configs/types.py"))
    node = next(n for n in ast.walk(tree)
                if isinstance(n, ast.FunctionDef) and n.name == "calculate_global_batch_sizes")
    space: dict = {}
    exec(compile(ast.Module(body=[node], type_ignores=[]), "maxtext/configs/types.py", "exec"), space)
    return space["calculate_global_batch_sizes"]


def trains(per_device: float, devices: int, accumulation: int = 1) -> int:
    """global_batch_size_to_train_on with base.yml's expansion_factor_real_data -1."""
    return maxtext_batch_sizes()(per_device, -1.0, devices, accumulation)[1]


def test_maxtext_truncates_the_nearest_float_of_13_6_on_216_devices() -> None:
    assert 13 / 6 == 2.1666666666666665 and trains(13 / 6, 216) == 467
    assert exact_per_device(468, 216) == 2.166666666666667 and trains(2.166666666666667, 216) == 468


@pytest.mark.parametrize(("micro", "devices", "accumulation"),
                         [(468, 216, 1), (468, 216, 3), (19, 64, 1), (1, 3, 7), (49_999, 4_096, 2),
                          (1 << 24, 24_576, 1), (7 * 10_007, 10_007 * 3, 5)])
def test_trained_batch_is_maxtexts_arithmetic_and_exact_per_device_hits_it(micro, devices, accumulation) -> None:
    value = exact_per_device(micro, devices)
    assert value is not None
    assert trained_batch(value, devices, accumulation) == trains(value, devices, accumulation) == micro * accumulation
    nearest = micro / devices
    assert trained_batch(nearest, devices, accumulation) == trains(nearest, devices, accumulation)


def test_no_float_gives_a_batch_above_the_products_precision() -> None:
    """Products near 2**54 are multiples of 4: no per_device_batch_size gives 2**54 + 1 sequences on 3 devices."""
    assert exact_per_device((1 << 54) + 1, 3) is None


def test_the_emitted_file_trains_the_planned_batch(tmp_path) -> None:
    out = tmp_path / "launch"
    res = CliRunner().invoke(main, ["evaluate", *JOB, *PLAN, "--emit", "maxtext", "--out", str(out)])
    assert res.exit_code == 0, res.output
    text = (out / "maxtext.yml").read_text()
    cfg = yaml.safe_load(text)
    assert cfg["per_device_batch_size"] == 2.166666666666667
    assert trains(cfg["per_device_batch_size"], 216, cfg["gradient_accumulation_steps"]) == 468
    assert "may train on a slightly different batch" not in text
    assert ("# batch: int(216 devices x per_device_batch_size 2.166666666666667, the float after 13/6's nearest "
            "2.1666666666666665, whose product MaxText truncates to 467) x gradient_accumulation_steps 1 = 468 "
            "sequences") in text
    # the audit reads the file back as the job the plan priced (exit 1: it finds a faster plan than this pinned
    # full-recompute layout, selective recompute under MaxText's named saves fitting in memory)
    audit = CliRunner().invoke(main, ["audit", *JOB, "--launch", str(out / "maxtext.yml"),
                                      "--launch", str(out / "jax_mesh.py")])
    assert audit.exit_code in (0, 1) and "Traceback" not in audit.output, audit.output
    assert "global batch 468" in audit.output


def test_the_audit_reads_a_truncating_file_as_the_batch_maxtext_trains(tmp_path) -> None:
    """The old file's 2.1666666666666665 trains 467, which 36 replicas cannot split: refused with MaxText's
    arithmetic and a value that works; a truncating product the replicas can split is read as what MaxText trains."""
    out = tmp_path / "launch"
    assert CliRunner().invoke(main, ["evaluate", *JOB, *PLAN, "--emit", "maxtext", "--out", str(out)]).exit_code == 0
    config = out / "maxtext.yml"
    text = config.read_text()
    config.write_text(text.replace("per_device_batch_size: 2.166666666666667", "per_device_batch_size: "
                                                                               "2.1666666666666665"))
    audit = ["audit", *JOB, "--launch", str(config), "--launch", str(out / "jax_mesh.py")]
    res = CliRunner().invoke(main, audit)
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert ("per_device_batch_size 2.1666666666666665 x 216 devices = 467.99999999999994, not a whole number of "
            "sequences: MaxText trains int(467.99999999999994) = 467 a micro-batch") in res.output
    assert "e.g. 432/216 = 2 or 468/216 = 2.166666666666667" in res.output
    # 2.01 x 216 = 434.15999999999997: MaxText trains 434, not 36 x 12 = 432 either: refused; 2.0001 trains 432
    config.write_text(text.replace("per_device_batch_size: 2.166666666666667", "per_device_batch_size: 2.0001"))
    res = CliRunner().invoke(main, [*audit, "--json"])
    assert res.exit_code in (0, 1), res.output
    assert trains(2.0001, 216) == 432 and '"global_batch": 432' in res.stdout
    assert re.search(r"int\(432\.0216\d*\) = 432 a micro-batch", res.stdout)


def test_where_no_float_gives_the_batch_the_header_says_so_and_promises_no_step(tmp_path, monkeypatch) -> None:
    """Unreachable below MAX_GLOBAL_BATCH; if it happened, the file would train another batch than the plan's,
    which its layout does not split: the header says what MaxText trains and prices nothing."""
    out = tmp_path / "launch"
    monkeypatch.setattr(maxtext, "exact_per_device", lambda micro, devices: None)
    res = CliRunner().invoke(main, ["evaluate", *JOB, *PLAN, "--emit", "maxtext", "--out", str(out)])
    text = (out / "maxtext.yml").read_text()
    assert ("no float per_device_batch_size gives 468 sequences on 216 devices: MaxText 0.2.5 trains "
            "int(216 x 2.1666666666666665) x 1 = 467") in text
    assert "so no step time is promised for it" in text and res.exit_code in (0, 1)
