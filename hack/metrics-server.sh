#!/usr/bin/env bash
# metrics-server (sigs.k8s.io/metrics-server, Apache-2.0): the local cluster's resource metrics
# API, which a HorizontalPodAutoscaler's CPU target reads. Built from the Go module proxy at
# the version module hack/metrics-server names into the machine cache (once per machine,
# version and Go), linked as build/bin/metrics-server; hack/cluster-up.sh runs it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

build_tool_module "$ROOT/hack/metrics-server" sigs.k8s.io/metrics-server/cmd/metrics-server \
  "$BUILD/metrics-server" metrics-server 1-4
mkdir -p "$BUILD/bin"
ln -sfn ../metrics-server/bin/metrics-server "$BUILD/bin/metrics-server"  # relative: the checkout may move
