# Two entry points for a new user: `make run` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck prepared unit soak bench generate vendor browser chromium sandbox clis screenshots clean

# --no-compile: a module's bytecode is made when it is first imported (and kept, see `unit`),
# not for every file of every package at install time (Ray's alone cost seconds).
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e '.[dev,ray]'
	touch $(STAMP)

# The Workbench's browser libraries, pinned in vendor.toml and checked by sha256.
VENDOR := bundle_server/workbench/vendor/.pins
$(VENDOR): bundle_server/workbench/vendor.toml | $(STAMP)
	$(BIN)/python -m bundle_server.workbench.vendor
vendor: $(VENDOR)

# Debian's Chromium for the browser tests, as its headless shell (chromium-headless-shell: the
# same Blink without the browser's UI, the build Playwright itself runs headless tests in; it
# spends less than half the full browser's CPU on the same tests). Playwright drives it and
# never downloads a browser of its own. And what the tests inject into the page: axe-core,
# pinned with its integrity hash in browser-tools/package-lock.json, in browser-tools/.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_INSTALL := DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends
BROWSER_TOOLS := browser-tools/node_modules/.installed
$(BROWSER_TOOLS): browser-tools/package.json browser-tools/package-lock.json
	cd browser-tools && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(BROWSER_TOOLS)
browser: $(BROWSER_TOOLS)
	@command -v chromium-headless-shell >/dev/null || { $(SUDO) apt-get update -qq && \
	  $(APT_INSTALL) chromium-headless-shell fonts-dejavu-core >/dev/null; }

# The full Chromium, for the benches that time what a user's browser does.
chromium:
	@command -v chromium >/dev/null || { $(SUDO) apt-get update -qq && \
	  $(APT_INSTALL) chromium fonts-dejavu-core >/dev/null; }

# Debian's bubblewrap: evaluation trials run their setup and grader commands in it
# (bundle_server/evals/sandbox.py).
# After `browser`: two apt-get runs at once would fight over apt's lock under `make -j`.
sandbox: | browser
	@command -v bwrap >/dev/null || { $(SUDO) apt-get update -qq && \
	  $(APT_INSTALL) bubblewrap >/dev/null; }

# The real host CLIs the tests run bundles in (Claude Code, Codex, Gemini CLI), pinned with
# their integrity hashes in clis/package-lock.json, installed into clis/node_modules (never
# globally). Install scripts stay off; Claude Code's own (which places its native binary)
# is the one run.
CLIS := clis/node_modules/.installed
$(CLIS): clis/package.json clis/package-lock.json
	cd clis && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	cd clis && node node_modules/@anthropic-ai/claude-code/install.cjs
	touch $(CLIS)
clis: $(CLIS)

# The development server on the bundled example project; Ctrl-C stops it.
PROJECT ?= examples/safe-shell
PORT ?= 0
run: $(STAMP) $(VENDOR)
	$(BIN)/bundle-server $(PROJECT) --port $(PORT)

# The lint runs beside the installs the tests need, the type check beside the tests (the
# tests leave a core idle often enough to hide it); each target's output is kept together.
test:
	$(MAKE) --no-print-directory -j4 --output-sync=target lint prepared
	$(MAKE) --no-print-directory -j2 --output-sync=target typecheck unit

prepared: $(STAMP) $(VENDOR) browser sandbox $(CLIS)

lint: $(STAMP)
	$(BIN)/ruff check bundle_contract bundle_server conformance tests bench examples hatch_build.py
	$(BIN)/ruff format --check bundle_contract bundle_server conformance tests bench examples hatch_build.py

typecheck: $(STAMP)
	$(BIN)/mypy

# The tests in three processes, each test file whole in one of them (module fixtures are shared
# by its tests): three, on two cores, because a third of the time the tests wait (on a host
# CLI, a browser, a deadline). Then the tests that measure the machine's time or memory (marked
# solo), apart from the rest, in two processes: only the files that hold them are collected.
# Python may cache bytecode here even where the environment says not to: hundreds of servers,
# workers and hooks start during the tests, and each would compile the same modules again.
# Last, one at a time, the solo tests marked alone: those that no other test may run beside.
SOLO_FILES = $(shell grep -l 'mark.solo' tests/test_*.py)
ALONE_FILES = $(shell grep -l 'mark.alone' tests/test_*.py)
unit: export PYTHONDONTWRITEBYTECODE =
unit: prepared
	$(BIN)/pytest -q -n 3 --dist loadfile -m "not solo and not soak"
	$(BIN)/pytest -q -n 2 --dist loadfile -m "solo and not alone and not soak" $(SOLO_FILES)
	$(BIN)/pytest -q -m "alone and not soak" $(ALONE_FILES)

# What runs longer than the suite's budget (a Ray cluster's trials under load), alone.
soak: $(STAMP) $(VENDOR) sandbox
	$(BIN)/pytest -q -m soak

bench: $(STAMP) $(VENDOR) chromium
	for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# The README's pictures of the Workbench, as the browser tests last took them: every view in
# the light and the dark theme (tests/test_workbench_face_browser.py).
VIEWS := sessions trace logs project routes runtime mcp protocol
SHOTS := $(foreach view,$(VIEWS),$(view)-light $(view)-dark)
screenshots:
	mkdir -p docs/screenshots
	for s in $(SHOTS); do cp test-artifacts/screenshots/$$s.png docs/screenshots/; done

generate: $(STAMP)
	$(BIN)/python -m bundle_contract generate

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis
