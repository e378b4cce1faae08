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

EXAMPLE ?= manifests/examples/quickstart.yaml
GO_SOURCES := $(shell find workloads -name '*.go' -o -name go.mod -o -name go.sum 2>/dev/null)
GO_BINARIES := $(BIN)/cxlab-runner-go $(BIN)/cxlab-delay $(BIN)/bare-goroutines

##@ Use

.PHONY: run
run: deps ## Run an experiment locally, by default the quick start (EXAMPLE=file.yaml; results in out/<name>/)
	cxlab run $(EXAMPLE)

.PHONY: plan
plan: deps ## Print the trials of EXAMPLE=... without running them
	cxlab plan $(EXAMPLE)

##@ Develop

.PHONY: test
test: deps lint ## Lint, type-check and run every test (Go and Python)
	cd workloads && go test ./...
	pytest

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

.PHONY: crd
crd: deps ## Regenerate the CRD (manifests/crds/) from the spec models
	python -m cxlab.crd

.PHONY: format
format: deps ## Rewrite Python and Go sources in the house style
	ruff format .
	ruff check --fix .
	gofmt -w workloads

##@ Set-up (run by the targets above when needed)

.PHONY: deps
deps: $(VENV)/.installed $(GO_BINARIES) build/.promtool ## Install Python packages, build Go programs, get promtool

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet -e '.[dev]'
	touch $@

$(GO_BINARIES) &: $(GO_SOURCES)
	mkdir -p $(BIN)
	cd workloads && go build -o ../$(BIN)/ ./cmd/... ./bench/...

# promtool lints the metrics endpoints in the tests; Debian's prometheus package carries it.
build/.promtool:
	@mkdir -p build
	command -v promtool >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; }
	touch $@

.PHONY: clean
clean: ## Remove build outputs and results (keeps the virtualenv)
	rm -rf build out

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*##"} /^##@/ {printf "\n%s\n", substr($$0, 5)} /^[a-zA-Z_-]+:.*##/ {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
