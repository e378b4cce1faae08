# cxlab — `make help` lists the targets. Everything installs into ignored folders:
# .venv/ (Python), build/ (Go binaries, reports), out/ (experiment results).

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
BIN := build/bin
export PATH := $(CURDIR)/$(BIN):$(CURDIR)/$(VENV)/bin:$(PATH)
# The Go checksum database does not answer for every module here; the committed go.sum pins them.
export GOSUMDB := off
# With PYTHONDONTWRITEBYTECODE=1 (this machine's environment sets it) every Python process
# compiles every module it imports from source: the operator's imports took 5.3 s instead of
# 1.8 s, and the tests start hundreds of Python processes. Bytecode goes to build/pycache,
# out of the source tree (the images compile their own).
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX := $(CURDIR)/build/pycache

EXAMPLE ?= manifests/examples/quickstart.yaml
# the kubectl built with the local cluster, at its version, pointed at it
KUBECTL := build/k8s/bin/kubectl --kubeconfig build/cluster/kubeconfig
# Asked until it holds: kubectl wait right after the apply fails when the CRD has no status yet
CRDS_ESTABLISHED := KUBECONFIG=build/cluster/kubeconfig bash -c 'source hack/lib.sh && \
	crds_established 60 concurrencyexperiments.cxlab.dev experimentschedules.cxlab.dev'
GO_SOURCES := $(shell find workloads -name '*.go' -o -name go.mod -o -name go.sum 2>/dev/null)
GO_BINARIES := $(BIN)/cxlab-runner-go $(BIN)/cxlab-delay $(BIN)/bare-goroutines
VENV_GO_LINKS := $(patsubst $(BIN)/%,$(VENV)/bin/%,$(GO_BINARIES))

##@ Use

.PHONY: run
run: deps ## Run an experiment locally, by default the quick start (EXAMPLE=file.yaml; results in out/<name>/)
	cxlab run $(EXAMPLE)

.PHONY: demo
demo: deps cluster-up ## Local cluster + CRD + operator, apply an example (EXAMPLE=...), wait, print the summary
	hack/demo.sh

.PHONY: plan
plan: deps ## Print the trials of EXAMPLE=... without running them
	cxlab plan $(EXAMPLE)

.PHONY: seeds-doc
seeds-doc: deps ## Run every seed's example, write manifests/examples/seeds.md: their figures beside the seeds' (FROM_RESULTS=1: from out/)
	python hack/seeds-doc.py $(if $(FROM_RESULTS),--from-results)

##@ Develop

.PHONY: test
test: ## Lint, type-check, every test: Go, Python (in parallel), the operator and its Helm chart on a local cluster it brings up; prints the time of each phase and the ten slowest tests
	hack/test.sh

.PHONY: lint
lint: deps ## ruff, mypy, gofmt and go vet
	ruff check .
	ruff format --check .
	mypy
	@unformatted=$$(gofmt -l workloads); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	cd workloads && go vet ./...

.PHONY: bench
bench: deps ## Runners vs bare programs: wall-time and peak-RSS ratios side by side
	python workloads/bench/bench_runners.py

.PHONY: bench-arrival
bench-arrival: deps ## Each model's arrival generator at 100, 1,000, 10,000/s beside Vegeta's (built once, hack/vegeta.sh)
	hack/vegeta.sh
	python workloads/bench/bench_arrival.py

.PHONY: bench-plan
bench-plan: deps ## Capacity plans run as planned: predicted P(wait), mean wait and p99 beside a simulation and a measured run, three service-time shapes
	python operator/bench/bench_plan.py

.PHONY: bench-regression
bench-regression: deps ## Schedules' regression check on simulated histories: false alarms and detection by noise, correlation, baseline runs, points
	python operator/bench/bench_regression.py

.PHONY: bench-merge
bench-merge: deps ## What merging a trial's Pods' Results costs (3, 8, 64 Pods)
	python operator/bench/bench_merge.py

.PHONY: crd
crd: deps ## Regenerate the CRDs (manifests/crds/) from the spec models
	python -m cxlab.crd

.PHONY: placement-schema
placement-schema: deps ## Regenerate operator/cxlab/placement-schema.json from Kubernetes' OpenAPI (then make crd)
	python hack/placement-schema.py

.PHONY: dashboards
dashboards: deps ## Regenerate the Grafana dashboards (dashboards/*.json) from dashboards/*.py
	python -m dashboards

.PHONY: bench-operator
bench-operator: deps cluster-up ## Operator costs on the local cluster beside a baseline commit: where each trial's seconds go, overhead and requests per trial, RSS
	$(KUBECTL) apply --server-side --force-conflicts -f manifests/crds/
	$(CRDS_ESTABLISHED)
	python operator/bench/bench_operator.py

.PHONY: bench-service
bench-service: deps cluster-up ## spec.service on the local cluster: what the operator adds to each variant's copy beyond Kubernetes' own start-up and deletion (goal: 1 s)
	$(KUBECTL) apply --server-side --force-conflicts -f manifests/crds/
	$(CRDS_ESTABLISHED)
	PYTHONPATH=operator/bench python operator/bench/bench_service.py

.PHONY: bench-pass
bench-pass: deps ## The CPU of the operator's passes alone (no cluster): bench-scale's experiment, trials ended per pass 1, 3, 10, and with a calibration after the sweep
	for batch in 1 3 10; do PYTHONPATH=operator/bench python operator/bench/bench_pass.py --batch $$batch; done
	PYTHONPATH=operator/bench python operator/bench/bench_pass.py --batch 1 --calibration

.PHONY: bench-scale
bench-scale: deps kwok-up ## The operator at scale on KWOK beside a baseline commit: 50 experiments x 100 trials on 100 fake nodes, a kill -9 halfway (CXLAB_SCALE_CHAOS=1: the apiserver and etcd restarted too)
	$(KUBECTL) apply --server-side --force-conflicts -f manifests/crds/
	$(CRDS_ESTABLISHED)
	python operator/bench/bench_scale.py

.PHONY: bench-scale-large
bench-scale-large: deps cluster-up ## The same at 200 experiments x 100 trials on 500 fake nodes (the baseline, which cannot run this size, stops after 20 min: CXLAB_SCALE_BASELINE_SECONDS)
	hack/kwok.sh start 500
	$(KUBECTL) apply --server-side --force-conflicts -f manifests/crds/
	$(CRDS_ESTABLISHED)
	CXLAB_SCALE_SIZE=large CXLAB_SCALE_BASELINE_SECONDS=$${CXLAB_SCALE_BASELINE_SECONDS:-1200} python operator/bench/bench_scale.py

.PHONY: helm
helm: ## Build Helm (v3.17, module hack/k8s) from the Go module proxy into the machine cache, linked as build/bin/helm (once per machine, about 1.5-5 min cold)
	hack/helm.sh

.PHONY: chart-sync
chart-sync: ## Copy the CRDs and the dashboards into the Helm chart (charts/cxlab/); tests fail on drift
	rm -f charts/cxlab/files/crds/*.yaml
	cp manifests/crds/*.yaml charts/cxlab/files/crds/
	rm -f charts/cxlab/dashboards/*.json
	shopt -s nullglob; for f in dashboards/*.json; do cp "$$f" charts/cxlab/dashboards/; done

.PHONY: format
format: deps ## Rewrite Python and Go sources in the house style
	ruff format .
	ruff check --fix .
	gofmt -w workloads

##@ Set-up (run by the targets above when needed)

.PHONY: deps
deps: $(VENV)/.installed $(GO_BINARIES) $(VENV_GO_LINKS) ## What `make run` needs: the Python packages and the Go programs

.PHONY: test-deps
test-deps: deps helm build/.promtool build/.chromium services ## What the tests need besides: Helm (the chart tests), promtool (metrics lint), headless Chromium (the report test) and the services under test

# Services under test that nobody here wrote (pyproject.toml [tool.cxlab.services]), each in a
# virtualenv of its own, apart from cxlab's: build/services/<name>/bin/gunicorn ...
SERVICES := build/services
.PHONY: services
services: $(SERVICES)/httpbin/.installed ## The services under test, each in its own virtualenv under build/services/ (httpbin served by gunicorn)
$(SERVICES)/%/.installed: pyproject.toml hack/image-requirements.py | $(VENV)/.installed
	rm -rf $(SERVICES)/$*
	$(VENV)/bin/uv venv --quiet --python $(VENV)/bin/python $(SERVICES)/$*
	$(VENV)/bin/python hack/image-requirements.py service:$* > $(SERVICES)/$*/requirements.txt
	$(VENV)/bin/uv pip install --quiet --python $(SERVICES)/$*/bin/python -r $(SERVICES)/$*/requirements.txt
	touch $@

# uv installs the same pins as pip, in seconds instead of a minute (its cache is machine-wide).
UV_VERSION := 0.13.9
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(VENV)/bin/uv pip install --quiet --python $(VENV)/bin/python -e '.[dev]'
	touch $@

# GOGC for the compiler only, as in hack/lib.sh (less of its CPU spent collecting garbage)
$(GO_BINARIES) &: $(GO_SOURCES)
	mkdir -p $(BIN)
	cd workloads && GOGC=400 go build -o ../$(BIN)/ ./cmd/... ./bench/...

# The Go programs beside the cxlab command too: `.venv/bin/cxlab run` finds them unactivated.
$(VENV_GO_LINKS): $(VENV)/bin/%: $(BIN)/% | $(VENV)/.installed
	ln -sf $(CURDIR)/$< $@

# promtool lints the metrics endpoints in the tests; Debian's prometheus package carries it.
build/.promtool:
	@mkdir -p build
	hack/need-pkgs.sh --recommends promtool:prometheus
	touch $@

# The report test looks at the HTML report in a real browser: Debian's headless Chromium.
build/.chromium:
	@mkdir -p build
	hack/need-pkgs.sh --recommends chromium:chromium
	touch $@

.PHONY: clean
clean: prometheus-down cluster-down ## Stop the cluster, remove this checkout's build outputs and results (the machine cache stays)
	rm -rf build out

.PHONY: clean-cache
clean-cache: ## Empty the machine-wide cache of Kubernetes, etcd, Kueue, KWOK, Helm, Prometheus and the image base (every checkout then builds them again)
	rm -rf "$${CXLAB_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/cxlab}"

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*##"} /^##@/ {printf "\n%s\n", substr($$0, 5)} /^[a-zA-Z_-]+:.*##/ {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Cluster (a real single-node Kubernetes v1.32.4, state in build/cluster/; needs root)

.PHONY: cluster-up
cluster-up: $(VENV)/.installed ## Start the local cluster, building what it needs; a no-op when it is up (KUBECONFIG=build/cluster/kubeconfig)
	hack/cluster-up.sh

.PHONY: cluster-down
cluster-down: ## Stop the local cluster and clean up after it (containers, mounts, cni0, iptables); safe to repeat
	hack/cluster-down.sh

.PHONY: tools
tools: ## Build KWOK, Prometheus and Kueue for the cluster tests (into the machine cache: once per machine)
	hack/kwok.sh build
	hack/prometheus.sh build
	hack/kueue.sh build

.PHONY: kwok-up
kwok-up: cluster-up ## KWOK next to the local cluster: 100 fake nodes (KWOK_NODES=N) whose trial Pods end with a Result
	hack/kwok.sh start

.PHONY: kwok-down
kwok-down: ## Stop KWOK and delete its fake nodes
	hack/kwok.sh stop

.PHONY: images
images: $(VENV)/.installed ## Build cxlab.dev/pause:dev, runner:dev, operator:dev and httpbin:dev (only when their inputs changed); import them if the cluster runs
	hack/images.sh

.PHONY: cluster-bin
cluster-bin: ## Build kube-apiserver, -controller-manager, -scheduler, kubelet, kube-proxy, kubectl into build/k8s/bin/
	hack/build-k8s.sh

.PHONY: prometheus-up
prometheus-up: cluster-up ## Start Prometheus for the local cluster (trial Pods, operator, cAdvisor) on 127.0.0.1:19090
	hack/prometheus.sh start

.PHONY: prometheus-down
prometheus-down: ## Stop the Prometheus prometheus-up started
	hack/prometheus.sh stop

.PHONY: kueue-up
kueue-up: cluster-up ## Start Kueue (sigs.k8s.io/kueue, built from the Go module proxy) next to the local cluster: experiments with spec.queueName
	hack/kueue.sh start

.PHONY: kueue-down
kueue-down: ## Stop the Kueue kueue-up started (and remove its webhooks)
	hack/kueue.sh stop

.PHONY: stress-cluster-up
stress-cluster-up: ## 5 cold bring-ups in a row, both cores kept busy, each followed by cluster-down (ROUNDS=5)
	hack/stress-bring-up.sh $(or $(ROUNDS),5)

.PHONY: cluster-test
cluster-test: cluster-up ## Smoke-test the local cluster: runner Pods pinned to their core, Pod and Service networking
	hack/smoke-test.sh
