# The two set-up commands of the README:  `make demo`  and  `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

$(VENV)/.base:
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0   # the CPU build on disk; a GPU machine may install its own torch first
	touch $@

.PHONY: install-llama install-test install-demo demo test bench
# llama-cpp-python (the `local` extra) is built first, on its own: its default native build emits AMX
# instructions that crash with SIGILL on these CPUs, so it is built portable, never from a cached wheel.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=ON -DGGML_FMA=ON -DGGML_F16C=ON

install-llama: $(VENV)/.base
	$(PY) -c "import llama_cpp" 2>/dev/null || \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) install -q --no-cache-dir "llama-cpp-python>=0.3.7"

install-demo: install-llama
	$(PIP) install -q scikit-build-core pybind11
	$(PIP) install -q --no-build-isolation -e ".[index,local]"

# The tests run the embedded LLM (a real llama.cpp server on 127.0.0.1) and a local 2-worker Ray cluster.
install-test: install-llama
	$(PIP) install -q scikit-build-core pybind11
	$(PIP) install -q --no-build-isolation -e ".[test,local,ray]" "llama-cpp-python[server]>=0.3.7"

demo: install-demo
	$(VENV)/bin/contextrag demo $(ARGS)

test: install-test
	$(PY) -m pytest -q --durations=15 tests

bench: install-test
	$(PIP) install -q -e ".[bench]" --no-build-isolation
	$(PY) -m pytest bench/ --benchmark-json=bench/results/cpu_pytest_benchmark.json -q
