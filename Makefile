# kubetray tasks. `make` alone lists them. Every target installs what it needs first.
PYTHON ?= $(firstword $(wildcard /usr/bin/python3.11 /usr/local/bin/python3.11) python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help system-deps install run test test-fast lint bench bench-login bench-idle bench-installed bench-hardening bench-eks bench-scale bench-status bench-all soak bench-recover bench-consent package fuzz screenshots clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 18

system-deps: ## install the OS packages the tests use (apt; sudo when not root)
	@scripts/install-system-deps

NODE_DEPS := tests/oidc/node_modules/.installed
# npm @kubernetes/client-node, one of the real clients tests/integration/test_consumer_matrix.py runs.
CLIENT_DEPS := tests/clients/node_modules/.installed
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
# What Qt's xcb platform plugin needs on a minimal Debian (desktops have these already).
XCB_LIBS := libxcb-icccm4 libxcb-keysyms1 libxcb-cursor0 libxkbcommon-x11-0 libxcb-image0 \
	libxcb-render-util0 libxcb-shape0 libxcb-xinerama0 libxcb-randr0

$(NODE_DEPS): tests/oidc/package.json tests/oidc/package-lock.json
	cd tests/oidc && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(CLIENT_DEPS): tests/clients/package.json tests/clients/package-lock.json
	cd tests/clients && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

RUNTIME := $(VENV)/.runtime

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test,dev]'
	$(BIN)/python -m exec_helper.dev_launcher $(BIN)/kubetray-exec
	@touch $@ $(RUNTIME)

# What running kubetray needs, and nothing of the test and dev tools (`make run` on a new machine).
$(RUNTIME): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e .
	$(BIN)/python -m exec_helper.dev_launcher $(BIN)/kubetray-exec
	@touch $@

install: $(STAMP) ## create .venv with kubetray, kubetray-exec (fast launcher) and test tools

run: $(RUNTIME) ## try kubetray: a demo provider, API server and kubeconfig (runtime deps only)
	@echo "kubetray and kubetray-exec are in $(abspath $(BIN)); to use the hints below here:"
	@echo "  export PATH=\"$(abspath $(BIN)):\$$PATH\""
	KUBETRAY_DEMO_VIA="make run" $(BIN)/kubetray demo

LINTED := app exec_helper tests bench scripts packaging
LINT := $(BIN)/ruff check $(LINTED) && $(BIN)/ruff format --check $(LINTED) && $(BIN)/mypy \
	&& $(BIN)/mypy --platform win32 && $(BIN)/mypy --platform darwin

lint: install ## ruff and mypy (also for Windows and macOS)
	$(LINT)

# tests/ui in a pytest process of its own: Qt objects left by hundreds of earlier tests made a
# rare abort while Python collected garbage inside Qt's event loop (see docs/gotchas.md).
# Each part runs even when an earlier one failed (a lint slip or one flaky test must not hide
# what the UI tests would have said); the run fails if any part did, and says which.
test: system-deps install $(NODE_DEPS) $(CLIENT_DEPS) ## everything: lint, then all tests against real peers
	@failed=""; \
	( $(LINT) ) || failed="$$failed lint"; \
	scripts/with-keyring $(BIN)/pytest --ignore=tests/ui $(PYTEST_ARGS) || failed="$$failed tests"; \
	scripts/with-keyring $(BIN)/pytest tests/ui $(PYTEST_ARGS) || failed="$$failed tests/ui"; \
	if [ -n "$$failed" ]; then echo "make test: failed:$$failed" >&2; exit 1; fi

# Left out: tests marked slow, keyring (asks for keyring_session), kubectl or sshd, and the
# integration, conformance, ui and packaging directories, which run real peers. Without a D-Bus
# session address nothing reaches a Secret Service, even on a desktop.
FAST_TESTS := tests/unit tests/kubeconfig -m "not slow and not keyring and not kubectl and not sshd"

test-fast: install ## unit and kubeconfig tests with no real peer (no lint), in under 30 s
	@start=$$(date +%s); \
	env -u DBUS_SESSION_BUS_ADDRESS -u KUBETRAY_REQUIRE_PEERS $(BIN)/pytest -q $(FAST_TESTS) $(PYTEST_ARGS); \
	status=$$?; echo "make test-fast: $$(( $$(date +%s) - start )) s"; exit $$status

bench: system-deps install ## print the hot-path figures (bench/hot_path)
	scripts/with-keyring $(BIN)/python bench/hot_path.py

package: system-deps install ## build the Linux .deb and .tar.gz (packaging/linux/build.sh)
	packaging/linux/build.sh $(BIN)/python

FUZZ_SECONDS ?= 60
fuzz: system-deps install ## fuzz the C launcher's answer parser with libFuzzer (FUZZ_SECONDS=60)
	$(BIN)/python -m tests.launcher fuzz $(FUZZ_SECONDS)

bench-eks: install ## EKS tokens: kubetray-exec beside aws eks get-token (AWS CLI v1 from PyPI in .bench/)
	$(BIN)/python bench/eks.py $(BENCH_ARGS)

bench-installed: system-deps install ## the packaged helper's figures (bench/installed_helper)
	scripts/with-keyring $(BIN)/python bench/installed_helper.py

bench-all: system-deps install $(NODE_DEPS) ## the performance figures side by side: packaged helper, agent start, idle, scale
	scripts/with-keyring $(BIN)/python bench/all.py $(BENCH_ARGS)

bench-login: system-deps install $(NODE_DEPS) ## print the login figures (bench/login)
	scripts/with-keyring $(BIN)/python bench/login.py

bench-idle: system-deps install ## print the app's idle RSS and CPU (bench/idle)
	scripts/with-keyring $(BIN)/python bench/idle.py

bench-scale: system-deps install $(NODE_DEPS) ## costs at 1 to 500 contexts and identities (bench/scale; BENCH_ARGS=--before-tree DIR)
	$(BIN)/python bench/scale.py $(BENCH_ARGS)

bench-status: install ## the agent's status answer at 10, 100, 400 identities, beside asdict's (bench/status_wire)
	$(BIN)/python bench/status_wire.py $(BENCH_ARGS)

bench-hardening: system-deps install ## the agent under abuse: RSS, waits, load (bench/hardening)
	scripts/with-keyring $(BIN)/python bench/hardening.py

SOAK_ARGS ?= --minutes 15 --before main
soak: system-deps install $(NODE_DEPS) ## 15 min of faults and kills, main's code beside this tree's (SOAK_ARGS: --case kill|outage|skew, --minutes 3 for a quick look; not in make test)
	$(BIN)/python bench/soak.py $(SOAK_ARGS)

bench-recover: system-deps install $(NODE_DEPS) ## seconds from a provider outage's end to kubectl served again, main's code beside this tree's
	$(BIN)/python bench/recover.py --before main $(RECOVER_ARGS)

bench-consent: install ## an SSH host attacks consent: questions asked, files written, served; ae58513 (before issue 37) beside this tree
	$(BIN)/python bench/remote_consent.py --before ae58513 $(CONSENT_ARGS)

# X11: openbox, trayer (XEmbed tray), dunst. Wayland: sway (headless), waybar (its tray is a
# StatusNotifierItem host), mako, grim (screenshots), wl-clipboard (what the clipboard holds).
DESKTOPS := xvfb trayer openbox dunst xdotool sway waybar mako-notifier grim wl-clipboard wtype

screenshots: system-deps install $(NODE_DEPS) ## a person's session on X11 and on Wayland, then docs/screenshots
	$(SUDO) apt-get install -y -qq --no-install-recommends $(DESKTOPS) $(XCB_LIBS) >/dev/null
	scripts/with-keyring $(BIN)/python scripts/person_run.py
	scripts/with-keyring $(BIN)/python scripts/screenshots.py

clean: ## remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
