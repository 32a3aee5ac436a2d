# dgxspark.ds4 — developer entry points. `make test` is the test command CI runs.
SHELL := /bin/bash
# A Python >= 3.12 that really runs (a pyenv shim on PATH may not): tests/harness/find-python.sh.
PY ?= $(or $(shell bash tests/harness/find-python.sh 2>/dev/null),python3.12)
VENV ?= .venv
BIN := $(VENV)/bin
COLL_LINK := .collections/ansible_collections/dgxspark/ds4
# Tools from the venv first; molecule and ansible-test call ansible-* by name.
export PATH := $(CURDIR)/$(BIN):$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/.collections
export NO_COLOR := 1
export PY_COLORS := 0
export ANSIBLE_FORCE_COLOR := false

# Steps of `make test`, in order (each one is also a target of its own). `suite` runs every Molecule scenario and
# then, in the same lanes, the checks: unit and integration (each in two halves), lint and sanity (see `suite` below).
# `make checks` runs the checks alone, CHECK_JOBS at once (default 2: each is mostly one process, this CI machine has
# two cores); `make molecule` the scenarios alone.
TEST_STEPS := bootstrap changelog-lint build suite
CHECK_STEPS := unit unit-sim integration-sim integration-rest lint sanity
CHECK_JOBS ?= 2
SCENARIOS ?=

.PHONY: venv collection-link install test node-image converge-bench molecule-destroy demo demo-down integration checks molecule $(TEST_STEPS) $(CHECK_STEPS)

venv: $(BIN)/ansible-playbook
$(BIN)/ansible-playbook: requirements.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -r requirements.txt
	touch $@

# FQCN names (dgxspark.ds4.*) resolve to this working tree through a symlink.
collection-link:
	mkdir -p $(dir $(COLL_LINK))
	ln -sfn $(CURDIR) $(COLL_LINK)

install: venv collection-link

# The whole CI (.ci/run): every step in order, stop at the first failure, one timing line
# per step and a summary at the end. `make test KEEP_GOING=1` runs every step anyway (to see
# all failures and timings at once) and still exits non-zero if one failed.
KEEP_GOING ?= 0
test:
	@summary=""; failed=0; t0=$$(date +%s.%N); \
	for step in $(TEST_STEPS); do \
	  echo "=== make $$step"; t=$$(date +%s.%N); \
	  if $(MAKE) --no-print-directory $$step; then rc=0; else rc=$$?; failed=1; fi; \
	  line=$$(awk -v s="$$t" -v e="$$(date +%s.%N)" -v n="$$step" -v r="$$rc" \
	    'BEGIN { printf "TIMING %-15s %7.1f s  %s", n, e - s, (r == 0 ? "ok" : "FAILED") }'); \
	  echo "$$line"; summary="$$summary$$line"$$'\n'; \
	  if [ "$$rc" -ne 0 ] && [ "$(KEEP_GOING)" != 1 ]; then break; fi; \
	done; \
	printf '\n%s' "$$summary"; \
	awk -v s="$$t0" -v e="$$(date +%s.%N)" -v f="$$failed" \
	  'BEGIN { printf "TIMING %-15s %7.1f s  %s\n", "total", e - s, (f ? "FAILED" : "ok") }'; \
	exit "$$failed"

# Each check's output in .cache/check-logs/<step>.log, a failed one's printed whole; one TIMING line per check
# (tests/harness/lanes.py). The venv first, so two lanes never build it at once (only integration needs the benchy venv).
checks: venv collection-link
	$(BIN)/python tests/harness/lanes.py --jobs $(CHECK_JOBS) $(CHECK_STEPS)

# Packages, dockerd, venv, collection link (idempotent; root only when something is missing).
bootstrap:
	bash tests/harness/bootstrap.sh

# pytest exits 5 when it collects no test: that fails the step too. --durations: the slowest tests in each log
# (.cache/check-logs/<name>.log), where CI time goes.
# The unit tests in two halves as well: unit-sim, the simulator's own tests and its conformance to the recorded real
# vLLM runs (in real time, mostly waiting: 136 s for 29 CPU-s, quiet), and the rest.
UNIT_SIM := tests/unit/real_vllm tests/unit/vllm_sim
unit: venv collection-link
	$(BIN)/pytest -q -p no:cacheprovider --durations=50 tests/unit $(addprefix --ignore=,$(UNIT_SIM))
unit-sim: venv collection-link
	$(BIN)/pytest -q -p no:cacheprovider --durations=30 $(UNIT_SIM)

integration: venv collection-link benchy-venv
	$(BIN)/pytest -q -p no:cacheprovider tests/integration

# The same suite in two halves for `make checks`: the tests that run simulators and the router in real time (mostly
# waiting) and the rest (mostly ansible-playbook runs, CPU-bound), so the two lanes stay balanced. Every file is in
# exactly one half.
INTEGRATION_SIM := $(sort $(wildcard tests/integration/test_*_sim.py) tests/integration/test_router_drain.py)
INTEGRATION_REST := $(filter-out $(INTEGRATION_SIM),$(sort $(wildcard tests/integration/test_*.py)))
integration-sim: venv collection-link benchy-venv
	$(BIN)/pytest -q -p no:cacheprovider --durations=30 $(INTEGRATION_SIM)
integration-rest: venv collection-link
	$(BIN)/pytest -q -p no:cacheprovider --durations=30 $(INTEGRATION_REST)

# llama-benchy's own venv for tests/integration/test_benchy_sim.py (bench.yml's pip task would install it anyway,
# ~35 s inside the test); the version is bench.yml's pin.
BENCHY_VERSION = $(shell sed -n 's/^ *ds4_benchy_version: "\(.*\)"/\1/p' playbooks/bench.yml)
BENCHY_VENV = .cache/llama-benchy-$(BENCHY_VERSION)
.PHONY: benchy-venv
benchy-venv: $(BENCHY_VENV)/bin/llama-benchy
$(BENCHY_VENV)/bin/llama-benchy: playbooks/bench.yml
	$(PY) -m venv $(BENCHY_VENV)
	$(BENCHY_VENV)/bin/pip install -q llama-benchy==$(BENCHY_VERSION)
	touch $@

# ansible-lint, then mypy over the collection's Python libraries (mypy.ini: which files are fully annotated), run
# from .collections so each file has its collection name, as Ansible imports it.
MYPY_PACKAGES := plugin_utils module_utils
lint: venv collection-link
	$(BIN)/ansible-lint --offline
	cd .collections && $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/mypy.ini --cache-dir $(CURDIR)/.cache/mypy \
	  $(foreach p,$(MYPY_PACKAGES),-p ansible_collections.dgxspark.ds4.plugins.$(p))

# ansible-test wants the collection at .../ansible_collections/<ns>/<name>: copy what git
# tracks plus untracked files git does not ignore into a temp tree and run it there.
# Its pip bootstrap script cannot be downloaded here: tests/harness/get_pip_shim.py stands in.
# (firstword: the venv may hold site-packages of two Pythons, each with its copy of ansible-test)
GET_PIP_VERSION = $(firstword $(shell sed -n "s/^ *pip='\([0-9.]*\)',/\1/p" $(VENV)/lib/python3.*/site-packages/ansible_test/_internal/python_requirements.py 2>/dev/null))
GET_PIP_CACHE = $(HOME)/.ansible/test/cache/get_pip_$(subst .,_,$(GET_PIP_VERSION)).py
sanity: venv
	@test -n "$(GET_PIP_VERSION)" || { echo "sanity: cannot read ansible-test's pip version"; exit 1; }
	@test -s "$(GET_PIP_CACHE)" || install -D -m 0644 tests/harness/get_pip_shim.py "$(GET_PIP_CACHE)"
	@# ansible-test keeps its venvs in ~/.ansible/test/venv, each linked to the Python that made it: one made from a
	@# clone since removed (its .cache/distro-python gone) fails every later run ("Required program ... not found")
	@for py in $(HOME)/.ansible/test/venv/*/*/*/bin/python; do \
	  if [ -L "$$py" ] && [ ! -e "$$py" ]; then echo "sanity: removing $${py%/bin/python} (its Python is gone)"; rm -rf "$${py%/bin/python}"; fi; \
	done
	@set -euo pipefail; tmp=$$(mktemp -d /tmp/ds4-sanity.XXXXXX); trap 'rm -rf "$$tmp"' EXIT; \
	dest="$$tmp/ansible_collections/dgxspark/ds4"; mkdir -p "$$dest"; \
	git ls-files -co --exclude-standard -z | while IFS= read -r -d '' f; do \
	  if [ -e "$$f" ] || [ -L "$$f" ]; then printf '%s\0' "$$f"; fi; done \
	  | tar --null -T - -cf - | tar -xf - -C "$$dest"; \
	cd "$$dest" && $(CURDIR)/$(BIN)/ansible-test sanity --venv --python $$($(CURDIR)/$(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])') --color no

changelog-lint: venv
	$(BIN)/antsibull-changelog lint

build: venv
	@set -euo pipefail; tmp=$$(mktemp -d /tmp/ds4-build.XXXXXX); trap 'rm -rf "$$tmp"' EXIT; \
	$(BIN)/ansible-galaxy collection build --force --output-path "$$tmp" .; ls -l "$$tmp"

# The node image (debootstrap, cached) and the inner test images built from it (cached by content).
node-image:
	bash tests/harness/build-node-image.sh
	bash tests/harness/build-sim-image.sh
	bash tests/harness/build-test-images.sh

# Every scenario (molecule/<name>/molecule.yml), MOLECULE_JOBS at once (default 3), longest first:
# `make molecule SCENARIOS=default`, `make molecule MOLECULE_JOBS=1`. Each scenario has its own container
# prefix and subnet (tests/harness/molecule_parallel.py), its log in .cache/molecule-logs/<name>.log
# (printed whole when it fails) and one TIMING line.
MOLECULE_JOBS ?= 3
molecule: venv collection-link node-image
	@mkdir -p .cache/images/inner
	$(BIN)/python tests/harness/molecule_parallel.py --jobs $(MOLECULE_JOBS) $(SCENARIOS)

# The scenarios, then the checks in the lanes they free, MOLECULE_JOBS lanes (tests/harness/molecule_parallel.py
# --then). Run one after the other, the checks kept this 2-core machine's cores 40-70 % busy for six minutes and the
# last scenario alone 40-60 % for ten; here the checks fill the lanes the shorter scenarios leave while the longest
# finish, at the scenarios' priority: a check takes a lane as a scenario would (docs/testing.md).
# The images (node-image) are built in the suite's first lane while lint and sanity, which need none, run in the others;
# integration-sim and unit-sim (mostly waiting on the clock, no image) run from the start, each in a lane of its own
# beside the three.
suite: venv collection-link benchy-venv
	@mkdir -p .cache/images/inner
	$(BIN)/python tests/harness/molecule_parallel.py --jobs $(MOLECULE_JOBS) $(SCENARIOS) --then $(CHECK_STEPS) \
	  --first node-image --free lint sanity --beside integration-sim unit-sim

# Two SIMULATED Sparks on this machine (containers with systemd and Docker, the vLLM simulator), deployed by the
# real site.yml with molecule/demo/inventory; ends with the endpoint, the API key, a chat completion and the
# commands to try next. `make demo-down` removes it. tests/harness/demo.py says what to install when Docker is missing.
demo: export DS4_DEMO_T0 := $(shell date +%s.%N)
demo:
	@python3 tests/harness/demo.py check
	@$(MAKE) --no-print-directory install node-image
	@$(BIN)/python tests/harness/demo.py up

demo-down: venv collection-link
	@$(BIN)/python tests/harness/demo.py down

# The converge benchmark (not part of `make test`): creates and converges the Molecule `replicas` scenario (two
# pairs, the router, TLS, over ssh; its own containers ds4-replicas-* and subnet, as `make molecule` names them),
# then benchmarks/converge_bench.py measures the everyday operations against a floor taken in the same run (wall and
# controller CPU; docs/measurements.md). The scenario is left up (`make molecule-destroy SCENARIOS=replicas`).
converge-bench: venv collection-link node-image
	@set -euo pipefail; mkdir -p .cache/images/inner; \
	$(BIN)/python tests/harness/molecule_parallel.py --action converge replicas; \
	flock /tmp/ds4-molecule-replicas.lock $(BIN)/python benchmarks/converge_bench.py --scenario replicas --json .cache/converge-bench.json

molecule-destroy: venv collection-link
	$(BIN)/python tests/harness/molecule_parallel.py --action destroy $(SCENARIOS)
