# runonce: every target installs what it needs first (a fresh clone needs only python3, node,
# gcloud with the Firestore emulator, and Java; `make test` installs redis-server with apt-get).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cksum < requirements.txt | cut -d' ' -f1)
export PYTHONPATH := $(CURDIR):$(CURDIR)/functions
export CHECKPOINT_DISABLE := 1
# jsii prints a banner on every synth because Node 20 is past its end of life; Node 20 is what our machines have.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.PHONY: install test test-fast bench lint typecheck runonce wheel service-image

## make install: the environment, and .venv/bin/runonce, the operators' command (docs/operate.md).
install: $(STAMP) $(VENV)/bin/runonce

# A script, not a console entry point: the repository is not an installed package, so the script
# sets the same PYTHONPATH as every target here and runs `python -m operate`.
$(VENV)/bin/runonce: $(STAMP)
	printf '#!/bin/sh\nPYTHONPATH="%s:%s/functions$${PYTHONPATH:+:$$PYTHONPATH}" exec "%s" -m operate "$$@"\n' \
		"$(CURDIR)" "$(CURDIR)" "$(abspath $(PY))" > $@
	chmod +x $@

## make runonce ARGS="runs --team example": the operators' command without the script.
runonce: $(STAMP)
	$(PY) -m operate $(ARGS)

$(STAMP): requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
	rm -f $(VENV)/.installed-* && touch $@

## make test: the whole suite against real emulators the tests start themselves (the fast tier included), in
## three pytest-xdist workers, each test file in one worker (most of the suite's time is spent waiting on
## servers, emulators and accelerated clocks, not computing); each worker starts the emulators it needs.
test: $(STAMP) valkey-server
	$(PY) -m pytest -n 3 --dist loadfile

## make valkey-server: the Redis-protocol server the Valkey store's tests start themselves
## (tests/store/valkey_server.py): valkey-server where it is on PATH, else Debian's redis-server 7,
## installed with apt-get when neither is (as root, as the machines and CI run).
.PHONY: valkey-server
valkey-server:
	@command -v valkey-server >/dev/null || command -v redis-server >/dev/null || { \
		echo "installing redis-server (apt-get) for the Valkey store's tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }

## make test-fast: the fast tier alone (tests marked `fast`: the decision logic on the in-memory store, and
## the tests that need no store); it starts no emulator, and a test in it that would start one fails.
test-fast: $(STAMP)
	RUNONCE_FAST_TIER=1 $(PY) -m pytest -m fast -q

## make lint: ruff's rules and its formatter, checked (not applied) over the whole tree; then the
## library's import contract (tests/import_contract.py: its layers import one way, the core no Google library).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m tests.import_contract

## make wheel: the library as the distribution `runonce` (functions/pyproject.toml), built by pip with the
## setuptools it pins, in pip's isolated build environment (fetched from the package index), into build/wheel.
## Install it with an extra per host: pip install 'runonce[fastapi]' (flask, django, fastapi, events, targets, watchdog).
wheel: $(STAMP)
	rm -rf build/wheel
	$(PY) -m pip wheel --quiet --disable-pip-version-check --no-deps --wheel-dir build/wheel ./functions
	rm -rf functions/build functions/runonce.egg-info

## make service-image IMAGE=REGION-docker.pkg.dev/PROJECT/REPO/closer:1: the example Cloud Run service
## (examples/service: FastAPI, a `@deduplicated` job at /jobs/close) built by Cloud Build from its Dockerfile
## with this checkout's runonce wheel (needs gcloud signed in; no local Docker). The sandbox's service jobs
## take it as RUNONCE_SANDBOX_SERVICE_IMAGE.
service-image: wheel
	@test -n "$(IMAGE)" || { echo "make service-image: set IMAGE=REGION-docker.pkg.dev/PROJECT/REPO/NAME:TAG" >&2; exit 2; }
	rm -rf examples/service/wheels && mkdir -p examples/service/wheels && cp build/wheel/runonce-*.whl examples/service/wheels/
	gcloud builds submit --tag "$(IMAGE)" examples/service

## make typecheck: mypy on the library, the stacks, the policy pack, the local scheduler, the emulators, the benchmarks
## and the operators' command.
typecheck: $(STAMP)
	$(VENV)/bin/mypy functions/runonce stacks policy localscheduler emulator benchmarks operate

## make bench: runonce against the seed's two-transaction pattern, side by side, one emulator: store time,
## then the event path's round trips per outcome, then the round trips per delivery under each overlap policy
## (allow, skip, wait side by side), then end to end over HTTP (functions-framework processes, floor subtracted),
## scheduled against the seed and events against one transaction on the event id; then the cold start's imports against
## functions_framework + firestore; then synth time against a plain cdktf app, and 100 jobs against 1. After the end to end
## ones, the Valkey rows (benchmarks/valkey*.py): the store against Powertools' SET NX + SET on one redis-server (store time,
## round trips), end to end on Valkey, and events per second at 8 concurrent requests on each store. All run; exit 1 if a target is missed.
bench: $(STAMP)
	@status=0; $(PY) -m benchmarks.ledger || status=1; echo; $(PY) -m benchmarks.events || status=1; \
	echo; $(PY) -m benchmarks.overlap || status=1; \
	echo; $(PY) -m benchmarks.endtoend || status=1; echo; $(PY) -m benchmarks.endtoend_events || status=1; \
	echo; $(PY) -m benchmarks.valkey || status=1; echo; $(PY) -m benchmarks.valkey_endtoend || status=1; \
	echo; $(PY) -m benchmarks.coldstart || status=1; \
	echo; $(PY) -m benchmarks.synth || status=1; exit $$status

# ---- stacks (CDKTF): one Terraform stack per team file in teams/ (see docs/stacks.md) ----
NODE_STAMP    := node_modules/.installed-$(shell cksum < package-lock.json | cut -d' ' -f1)
CHECKOV_VENV  := $(VENV)/checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed-$(shell cksum < policy/requirements-checkov.txt | cut -d' ' -f1)
CDKTF         := npx --no-install cdktf
POLICY_TARGETS ?= cdktf.out

.PHONY: synth deploy policy test-sandbox bench-synth

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	rm -f node_modules/.installed-* && touch $@

# checkov has its own venv: its pins conflict with requirements.txt.
$(CHECKOV_STAMP): policy/requirements-checkov.txt $(STAMP)
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --disable-pip-version-check -r policy/requirements-checkov.txt
	rm -f $(CHECKOV_VENV)/.installed-* && touch $@

# The stacks tests run checkov on the synthesized example stacks.
test: $(CHECKOV_STAMP)

# TOOLCHAIN=cdktn: the same stacks on CDK Terrain, CDKTF's maintained fork (docs/stacks/toolchain.md),
# from its own venv (requirements-cdktn.txt) with jsii on Node 22 from npm (toolchains/cdktn), no CLI:
# the app synthesizes itself and Terraform deploys cdktf.out. Same Terraform JSON (tests/stacks/test_toolchain.py).
TOOLCHAIN       ?= cdktf
CDKTN_VENV      := $(VENV)/cdktn
CDKTN_STAMP     := $(CDKTN_VENV)/.installed-$(shell cksum < requirements-cdktn.txt | cut -d' ' -f1)
CDKTN_NODE_DIR  := toolchains/cdktn
CDKTN_NODE_STAMP := $(CDKTN_NODE_DIR)/node_modules/.installed-$(shell cksum < $(CDKTN_NODE_DIR)/package-lock.json | cut -d' ' -f1)
CDKTN_APP       := RUNONCE_TOOLCHAIN=cdktn JSII_NODE=$(CURDIR)/$(CDKTN_NODE_DIR)/node_modules/.bin/node $(CDKTN_VENV)/bin/python -O main.py

ifeq ($(filter $(TOOLCHAIN),cdktf cdktn),)
$(error TOOLCHAIN=$(TOOLCHAIN) is not a toolchain: use TOOLCHAIN=cdktf (the default) or TOOLCHAIN=cdktn)
endif

# CDK Terrain's venv: its packages replace cdktf's (same module names inside jsii), so they live apart.
$(CDKTN_STAMP): requirements-cdktn.txt
	$(PYTHON) -m venv $(CDKTN_VENV)
	$(CDKTN_VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements-cdktn.txt
	rm -f $(CDKTN_VENV)/.installed-* && touch $@

$(CDKTN_NODE_STAMP): $(CDKTN_NODE_DIR)/package.json $(CDKTN_NODE_DIR)/package-lock.json
	cd $(CDKTN_NODE_DIR) && npm ci --no-audit --no-fund --loglevel=error
	rm -f $(CDKTN_NODE_DIR)/node_modules/.installed-* && touch $@

# The stacks tests synthesize every stack under both toolchains and compare the JSON.
test: $(CDKTN_STAMP) $(CDKTN_NODE_STAMP)

ifeq ($(TOOLCHAIN),cdktn)
## make synth TOOLCHAIN=cdktn, make deploy TOOLCHAIN=cdktn STACK=<team>: the same on CDK Terrain (its
## own venv and Node 22; the app synthesizes, then Terraform init and apply in cdktf.out/stacks/<team>).
synth: $(CDKTN_STAMP) $(CDKTN_NODE_STAMP)
	$(CDKTN_APP)

deploy: $(CDKTN_STAMP) $(CDKTN_NODE_STAMP)
	@test -n "$(STACK)" || { echo "usage: make deploy TOOLCHAIN=cdktn STACK=<team>  (the team's name, or its file in teams/)"; exit 2; }
	@stack=$$($(CDKTN_VENV)/bin/python -m stacks.stack_names '$(STACK)') || exit 2; \
	echo "$(CDKTN_APP)" && $(CDKTN_APP) && \
	echo "terraform -chdir=cdktf.out/stacks/$$stack init && terraform -chdir=cdktf.out/stacks/$$stack apply" && \
	terraform -chdir="cdktf.out/stacks/$$stack" init -input=false && terraform -chdir="cdktf.out/stacks/$$stack" apply
else
## make synth: validate every team in teams/, then write cdktf.out/stacks/<team> (offline).
synth: $(STAMP) $(NODE_STAMP)
	$(CDKTF) synth

## make deploy STACK=<team>: synth and deploy one team's stack (needs Google Cloud credentials).
## STACK may also be the team's file (orders.py, teams/orders.py): it is mapped to its stack.
deploy: $(STAMP) $(NODE_STAMP)
	@test -n "$(STACK)" || { echo "usage: make deploy STACK=<team>  (the team's name, or its file in teams/)"; exit 2; }
	@stack=$$($(PY) -m stacks.stack_names '$(STACK)') || exit 2; echo "$(CDKTF) deploy $$stack"; $(CDKTF) deploy "$$stack"
endif

## make policy: least-privilege rule pack and checkov (offline) on every synthesized stack.
## make policy POLICY_TARGETS=tests/stacks/fixtures/bad.tf.json: the same on the bad stack (fails).
policy: synth $(CHECKOV_STAMP)
	$(PY) -m policy --checkov $(CHECKOV_VENV)/bin/checkov $(POLICY_TARGETS)

## make test-sandbox: apply the sandbox team (tests/sandbox/teams.py) to RUNONCE_SANDBOX_PROJECT, test it,
## destroy it; without the variables (docs/stacks.md, "The sandbox suite") every test is skipped.
test-sandbox: $(STAMP)
	$(PY) -m pytest -m sandbox tests/sandbox

## make bench-synth: synth time of our app against a plain cdktf app, and of 100 jobs against 1.
bench-synth: $(STAMP)
	$(PY) -m benchmarks.synth

## make demo: the team files' jobs (functions, and service jobs on local stand-ins of their services) on the Firestore emulator, delivered by the local Cloud
## Scheduler with faults on an accelerated clock (one run never delivered and one claim left stuck
## on purpose), then an event job pushed by the Pub/Sub emulator with faults, each ending with a
## verdict table, then Flask and Django on gunicorn and FastAPI on uvicorn under the same faults, a
## verdict row each, then a job per overlap policy and a run the watchdog catches up, a row each, and a
## scheduled job and an event job on a Valkey server it starts (redis-server, installed by
## valkey-server when missing), a row each; the picture of every delivery goes to build/demo-timeline.png
## (see docs/demo.md).
.PHONY: demo
demo: $(STAMP) valkey-server
	$(PY) -m localscheduler $(DEMO_ARGS)
