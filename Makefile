# The two set-up commands of the README:  `make demo`  and  `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

$(VENV)/.base:
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0   # the CPU build on disk; a GPU machine may install its own torch first
	touch $@

.PHONY: install-test install-demo demo test bench
install-test: $(VENV)/.base
	$(PIP) install -q scikit-build-core pybind11
	$(PIP) install -q --no-build-isolation -e ".[test]"

install-demo: $(VENV)/.base
	$(PIP) install -q scikit-build-core pybind11
	$(PIP) install -q --no-build-isolation -e ".[index]"

demo: install-demo
	$(VENV)/bin/contextrag demo $(ARGS)

test: install-test
	$(PY) -m pytest -q tests

bench: install-test
	$(PIP) install -q -e ".[bench]" --no-build-isolation
	$(PY) -m pytest bench/ --benchmark-json=bench/results/cpu_pytest_benchmark.json -q
