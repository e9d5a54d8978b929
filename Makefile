# kubetray tasks. `make` alone lists them. Every target installs what it needs first.
PYTHON ?= $(firstword $(wildcard /usr/bin/python3.11 /usr/local/bin/python3.11) python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help system-deps install run test lint bench bench-login clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 14

system-deps: ## install the OS packages the tests use (apt; sudo when not root)
	@scripts/install-system-deps

NODE_DEPS := tests/oidc/node_modules/.installed

$(NODE_DEPS): tests/oidc/package.json tests/oidc/package-lock.json
	cd tests/oidc && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test,dev]'
	$(BIN)/python -m exec_helper.launcher $(BIN)/kubetray-exec
	@touch $@

install: $(STAMP) ## create .venv with kubetray, kubetray-exec (fast launcher) and test tools

run: install ## try kubetray: the app with a demo provider, API server and kubeconfig
	$(BIN)/kubetray demo

lint: install ## ruff and mypy (also for Windows and macOS)
	$(BIN)/ruff check app exec_helper tests bench
	$(BIN)/ruff format --check app exec_helper tests bench
	$(BIN)/mypy
	$(BIN)/mypy --platform win32
	$(BIN)/mypy --platform darwin

test: system-deps install $(NODE_DEPS) lint ## everything: lint, then all tests against real peers
	scripts/with-keyring $(BIN)/pytest $(PYTEST_ARGS)

bench: system-deps install ## print the hot-path figures (bench/hot_path)
	scripts/with-keyring $(BIN)/python bench/hot_path.py

bench-login: system-deps install $(NODE_DEPS) ## print the login figures (bench/login)
	scripts/with-keyring $(BIN)/python bench/login.py

clean: ## remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
