#!/usr/bin/env bash
# Helm, built from the Go module proxy into the machine-wide cache (lib.sh) once per machine,
# version and Go, and linked into build/bin/helm. Its version is the one module hack/k8s
# requires (3.17, the line on Kubernetes 1.32's libraries): built there with Kubernetes'
# compile flags, it shares the compiled client-go, api and kubectl packages (build-k8s.sh).
#
# A plain build leaves Helm's version and its default Kubernetes version (for `helm template`
# and `helm lint`; 1.20 otherwise) unset: the ldflags of Helm's own Makefile set them.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

HELM_PKG=helm.sh/helm/v3
HELM_VERSION=$(cd "$ROOT/hack/k8s" && go list -m -f '{{.Version}}' "$HELM_PKG")
ldflags="-s -w -X $HELM_PKG/internal/version.version=$HELM_VERSION -X $HELM_PKG/internal/version.gitTreeState=clean"
for pkg in pkg/lint/rules pkg/chartutil; do
  ldflags+=" -X $HELM_PKG/$pkg.k8sVersionMajor=1 -X $HELM_PKG/$pkg.k8sVersionMinor=32"
done

build() { # out
  log "building Helm $HELM_VERSION from the Go module proxy (about 1.5-5 min cold; less after Kubernetes)"
  go_build_in "$ROOT/hack/k8s" -ldflags "$ldflags" -o "$1/" "$HELM_PKG/cmd/helm"
}

from_cache helm "$(hash_inputs "$ROOT/hack/k8s/go.mod" "$ROOT/hack/k8s/go.sum" -- "$ldflags" "$(go version)")" \
  "$BUILD/helm" build
mkdir -p "$BUILD/bin"
ln -sfn ../helm/helm "$BUILD/bin/helm"  # relative: the checkout may move
