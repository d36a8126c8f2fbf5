# Two entry points on a fresh machine with Python 3.11: `make plan` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: plan test verify bench alloc-bench validate readme calibrate-bench report-screenshots sweep-bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

plan: $(BIN)/.installed
	$(BIN)/placement plan --model llama3-405b --cluster dgx-h100 --gpus 16384 --seq-len 8192 --global-batch 2048

test: $(BIN)/.installed
	$(BIN)/python -m pytest

# Emitted launch configs checked by the frameworks' own code (installs the heavy `verify` extra).
$(BIN)/.verify-installed: $(BIN)/.installed pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,verify]'
	# megatron-core 0.19.2 declares Python >= 3.12 but ships a cp311 wheel that imports on 3.11; installed
	# on its own line so the override cannot touch numpy
	$(BIN)/python -m pip install --quiet --ignore-requires-python --no-deps megatron-core==0.19.2
	# maxtext 0.2.5 (Python >= 3.12, flax/orbax) is never imported: tests/verify/test_jax.py reads its base.yml
	# and runs its mesh functions from the installed source files, so the wheel goes in without dependencies
	$(BIN)/python -m pip install --quiet --ignore-requires-python --no-deps maxtext==0.2.5
	# deepspeed 0.19.8 is an sdist whose setup.py imports torch and setuptools: build it in this venv
	# (--no-build-isolation, else pip pulls a CUDA torch into an isolated env) with its build tools first,
	# and compile no C++/CUDA ops (DS_BUILD_OPS=0: the checks import its Python only)
	$(BIN)/python -m pip install --quiet 'setuptools>=70.1' wheel ninja
	DS_BUILD_OPS=0 $(BIN)/python -m pip install --quiet --no-build-isolation deepspeed==0.19.8
	touch $@

verify: $(BIN)/.verify-installed
	# and the tests that read the installed MaxText and torchtitan sources (tests/maxtext_wheel.py), skipped by make test
	PLACEMENT_VERIFY=1 $(BIN)/python -m pytest tests/verify tests/test_rope_config_mismatch.py \
		tests/test_maxtext_gpt_oss_config.py tests/test_maxtext_routing_groups.py

validate: $(BIN)/.installed
	$(BIN)/placement validate

# the README's accuracy section and its GPU speed spread row, regenerated from `placement validate` (never typed by hand)
readme: $(BIN)/.installed
	$(BIN)/python benchmarks/readme_accuracy.py
	$(BIN)/python benchmarks/fit_speed_spread.py

# synthetic recovery, real nccl-tests fits and leave-one-out on the shipped runs -> README calibration section
calibrate-bench: $(BIN)/.installed
	$(BIN)/python benchmarks/bench_calibrate.py

# the README's screenshots of the --report pages, taken in headless Chromium (Debian: apt-get install chromium)
report-screenshots: $(BIN)/.installed
	$(BIN)/python benchmarks/report_screenshots.py

# the shipped purchase study timed from an empty cache and re-priced with --set -> benchmarks/README.md
sweep-bench: $(BIN)/.installed
	$(BIN)/python benchmarks/bench_sweep.py

bench: $(BIN)/.installed
	$(BIN)/python benchmarks/bench_plan.py

# plan --top-k 5 --json on a 256-node SLURM allocation and at 131,072 GPUs -> benchmarks/README.md
alloc-bench: $(BIN)/.installed
	$(BIN)/python benchmarks/bench_alloc_plan.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
