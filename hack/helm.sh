#!/usr/bin/env bash
# Helm, built from the Go module proxy into the machine-wide cache (lib.sh) once per machine,
# version and Go, and linked into build/bin/helm.
#
# go install leaves Helm's version and its default Kubernetes version (for `helm template` and
# `helm lint`; 1.20 otherwise) unset: the ldflags of Helm's own Makefile set them.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

HELM_VERSION=v3.16.4
HELM_PKG=helm.sh/helm/v3
ldflags="-X $HELM_PKG/internal/version.version=$HELM_VERSION -X $HELM_PKG/internal/version.gitTreeState=clean"
for pkg in pkg/lint/rules pkg/chartutil; do
  ldflags+=" -X $HELM_PKG/$pkg.k8sVersionMajor=1 -X $HELM_PKG/$pkg.k8sVersionMinor=32"
done

build() { # out
  log "building Helm $HELM_VERSION from the Go module proxy (about 1.5-5 min cold)"
  GOBIN=$1 go install -ldflags "$ldflags" "$HELM_PKG/cmd/helm@$HELM_VERSION"
}

from_cache helm "$(hash_inputs -- "$HELM_VERSION" "$ldflags" "$(go version)")" "$BUILD/helm" build
mkdir -p "$BUILD/bin"
ln -sfn ../helm/helm "$BUILD/bin/helm"  # relative: the checkout may move
