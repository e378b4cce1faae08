#!/usr/bin/env bash
# Vegeta (github.com/tsenart/vegeta, MIT), the reference open-loop HTTP load generator `make
# bench-arrival` compares the runners' generators with: built from the Go module proxy at the
# version module hack/vegeta names into the machine cache (once per machine, version and Go),
# linked as build/bin/vegeta. k6's constant-arrival-rate executor would be the other reference,
# but k6 is AGPL-licensed and not used in this project.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

build_tool_module "$ROOT/hack/vegeta" github.com/tsenart/vegeta/v12 "$BUILD/vegeta" Vegeta 0.2-1
mkdir -p "$BUILD/bin"
ln -sfn ../vegeta/bin/vegeta "$BUILD/bin/vegeta"  # relative: the checkout may move
