#!/usr/bin/env bash
# `make test`, phase by phase: what the tests need, the linters, the Go tests, the unit tests
# (in parallel), the builds, the local cluster's bring-up, the cluster tests that share it
# side by side (each pytest-xdist worker with its own operator and namespaces), then alone
# those that kill or restart a component (marker `solo`). Each phase is timed into
# build/test/phases.tsv; at the end the time of each and the ten slowest tests
# (hack/test-report.py), whatever failed. Stops at the first failing phase; the cluster it
# brought up goes down again either way.
#
#   PYTEST_WORKERS=N    parallel workers of the unit tests (default: the cores)
#   CLUSTER_WORKERS=N   parallel workers of the cluster tests (default 3: they mostly wait)
#   PYTEST_ARGS=...     more arguments for every pytest run (-x, -k ...)
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

REPORT="$BUILD/test"
rm -rf "$REPORT" && mkdir -p "$REPORT"
export PATH="$ROOT/build/bin:$ROOT/.venv/bin:$PATH"
WORKERS=${PYTEST_WORKERS:-$(nproc)}
CLUSTER_WORKERS=${CLUSTER_WORKERS:-3}
read -ra EXTRA <<< "${PYTEST_ARGS:-}"
failed=0
brought_up=0

phase() { # name command...: run it timed, unless a phase before failed
  local name=$1 began=$SECONDS status; shift
  ((failed)) && return 1
  log "phase $name: $*"
  "$@"
  status=$?
  printf '%s\t%s\t%s\n' "$name" "$((SECONDS - began))" "$status" >> "$REPORT/phases.tsv"
  ((status == 0)) || failed=1
  return "$status"
}

finish() {
  if ((brought_up)); then
    make -s cluster-down >/dev/null 2>&1 || log "warning: make cluster-down failed"
  fi
  python3 "$ROOT/hack/test-report.py" "$REPORT"
}
trap finish EXIT

go_test() { (cd workloads && go test ./...); }

cluster_up() {
  # Taken down at the end only if this run brought it up.
  if [[ -f $KUBECONFIG_FILE ]] && api /readyz >/dev/null 2>&1; then
    log "the local cluster already runs: it stays up"
  else
    brought_up=1
  fi
  make -s cluster-up
}

phase deps make -s deps test-deps
phase lint make -s lint
phase go-test go_test
phase unit pytest -m "not cluster" -n "$WORKERS" --junitxml="$REPORT/unit.xml" "${EXTRA[@]}"
phase builds make -s cluster-bin images tools
phase bring-up cluster_up
# a test file stays on one worker: its module fixtures (a Helm release, Kueue) are made once
phase cluster pytest -m "cluster and not solo" -n "$CLUSTER_WORKERS" --dist loadfile \
  --junitxml="$REPORT/cluster.xml" "${EXTRA[@]}"
phase solo pytest -m "cluster and solo" --junitxml="$REPORT/solo.xml" "${EXTRA[@]}"
exit "$failed"
