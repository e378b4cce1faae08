#!/usr/bin/env bash
# Argo Rollouts' own CRDs (github.com/argoproj/argo-rollouts, Apache-2.0), the reference
# tests/manifests/test_argo_rollouts_example.py checks manifests/examples/argo-rollouts/ against: the module's
# manifests/crds/ from the Go module proxy, at the version and checksum pinned here, copied
# into the machine cache once per machine and version and linked as build/argo-rollouts/crds/.
# Prints that folder.
#
# v1.10.1: the newest release whose module this Go (1.26.8) downloads; v1.10.2 and v1.9.3 ask
# for Go 1.26.10 (GOTOOLCHAIN=local refuses them). v1.10.2's analysis-template-crd.yaml is the
# same bytes. To move on: set the version, run `go mod download -json MODULE@VERSION` from
# outside any module with the checksum database on (GOSUMDB=sum.golang.org, Go's default) and
# copy its "Sum" here.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

ARGO_ROLLOUTS_MODULE=github.com/argoproj/argo-rollouts
ARGO_ROLLOUTS_VERSION=v1.10.1
# The module zip's go.sum hash: lib.sh turns the checksum database off, so it is checked here.
ARGO_ROLLOUTS_SUM=h1:6oyVPGiHHxu3ixkT6mngemh88HLPDoTX1IwO6KNR1Y4=
CRDS=(analysis-template-crd.yaml rollout-crd.yaml)
DEST="$BUILD/argo-rollouts/crds"

fetch_into() { # out
  command -v go >/dev/null || die "go is not on PATH: it downloads $ARGO_ROLLOUTS_MODULE"
  log "downloading $ARGO_ROLLOUTS_MODULE@$ARGO_ROLLOUTS_VERSION from the Go module proxy"
  local json dir sum error name
  # From / : outside any module, so no go.mod or go.work of the caller's takes part.
  json=$(cd / && GOWORK=off GOFLAGS=-mod=mod go mod download -json \
    "$ARGO_ROLLOUTS_MODULE@$ARGO_ROLLOUTS_VERSION") || true
  error=$(sed -n 's/^\t"Error": "\(.*\)",\{0,1\}$/\1/p' <<< "$json")
  dir=$(sed -n 's/^\t"Dir": "\(.*\)",\{0,1\}$/\1/p' <<< "$json")
  sum=$(sed -n 's/^\t"Sum": "\(.*\)",\{0,1\}$/\1/p' <<< "$json")
  [[ -z $error && -d $dir ]] ||
    die "could not download $ARGO_ROLLOUTS_MODULE@$ARGO_ROLLOUTS_VERSION: ${error:-$json}"
  [[ $sum == "$ARGO_ROLLOUTS_SUM" ]] ||
    die "$ARGO_ROLLOUTS_MODULE@$ARGO_ROLLOUTS_VERSION has checksum $sum, not the pinned $ARGO_ROLLOUTS_SUM"
  for name in "${CRDS[@]}"; do
    cp "$dir/manifests/crds/$name" "$1/"
  done
  chmod u+w "$1"/*.yaml  # the module cache's files are read-only
  echo "$ARGO_ROLLOUTS_MODULE@$ARGO_ROLLOUTS_VERSION $ARGO_ROLLOUTS_SUM" > "$1/source.txt"
}

from_cache argo-rollouts-crds \
  "$(hash_inputs -- "$ARGO_ROLLOUTS_MODULE@$ARGO_ROLLOUTS_VERSION" "$ARGO_ROLLOUTS_SUM" "${CRDS[@]}")" \
  "$DEST" fetch_into
echo "$DEST"
