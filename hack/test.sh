#!/usr/bin/env bash
# `make test`, phase by phase. Helm and then Kubernetes are built in the background from the
# start (the longest build from a cold cache; Helm first, as the unit tests need it, from the
# same module so that their common packages compile once). First the virtualenv and the Go
# programs (deps); then, in the background, promtool and Chromium (test-deps: the unit tests
# need them and Helm), the images and, once Kubernetes is built, the local cluster (bring-up),
# and, once Kubernetes is built, the tools only the solo tests need (tools: KWOK, Prometheus,
# Kueue), while the linters, the Go tests and the unit tests (in parallel) run. The cluster
# tests that can share it run side by side (each pytest-xdist worker with its own operator and
# namespaces), then alone those that start, stop or load what every test shares (marker
# `solo`: KWOK, Kueue, Prometheus, a thousand trials, trials of several Pods;
# tests/cluster/conftest.py). Each phase is timed into build/test/phases.tsv (a background
# phase's time includes its waits for the builds it needs); at the end the time of each, the
# whole run's, and the ten slowest tests (hack/test-report.py), whatever failed. Stops at the
# first failing phase; the cluster it brought up goes down again either way.
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
began=$SECONDS
failed=0
brought_up=0
declare -A background   # the pids of the background phases, by name, while they run

record() { # name seconds status [background]
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" >> "$REPORT/phases.tsv"
}

phase() { # name command...: run it timed, unless a phase before failed
  local name=$1 start=$SECONDS status; shift
  ((failed)) && return 1
  log "phase $name: $*"
  "$@"
  status=$?
  record "$name" "$((SECONDS - start))" "$status"
  ((status == 0)) || failed=1
  return "$status"
}

# A phase in the background, its output in build/test/<name>.log (printed if it fails).
phase_in_background() { # name command...
  local name=$1; shift
  ((failed)) && return 1
  log "phase $name (in the background, output in ${REPORT#"$ROOT"/}/$name.log): $*"
  (
    start=$SECONDS
    "$@" > "$REPORT/$name.log" 2>&1
    status=$?
    record "$name" "$((SECONDS - start))" "$status" background
    exit "$status"
  ) &
  background[$name]=$!
}

wait_background() { # name: its end; the run fails with it
  local name=$1 pid=${background[$1]:-}
  ((failed)) && return 1
  [[ -n $pid ]] || return 1
  wait "$pid"
  local status=$?
  unset "background[$name]"
  if ((status)); then
    log "phase $name failed:"
    tail -n 60 "$REPORT/$name.log" >&2
    failed=1
  fi
  return "$status"
}

finish() {
  local pid
  for pid in "${background[@]}"; do wait "$pid"; done
  if ((brought_up)); then
    make -s cluster-down >/dev/null 2>&1 || log "warning: make cluster-down failed"
  fi
  printf 'wall\t%s\t%s\t\n' "$((SECONDS - began))" "$failed" >> "$REPORT/phases.tsv"
  python3 "$ROOT/hack/test-report.py" "$REPORT"
}
trap finish EXIT

go_test() { (cd workloads && go test ./...); }

# Kubernetes after Helm, as in the kubernetes phase: the phases that need it ask for both in
# that order, so that none builds Kubernetes beside Helm's build (their common packages would
# compile twice); each waits on the cache's lock (lib.sh) while another builds.
k8s_after_helm() { make -s helm cluster-bin; }

builds_and_bring_up() { # the images do not need Kubernetes: built while it builds
  make -s images && k8s_after_helm && make -s cluster-up
}

# KWOK shares most of its packages with Kubernetes: built after it, it compiles little.
tools_after_k8s() { k8s_after_helm && make -s tools; }

# Taken down at the end only if this run brought it up.
if [[ -f $KUBECONFIG_FILE ]] && api /readyz >/dev/null 2>&1; then
  log "the local cluster already runs: it stays up"
else
  brought_up=1
fi

# Helm and Kubernetes from the first second (they need Go only; Kubernetes is the longest
# build from a cold cache); who asks for them again waits for them (the cache's lock, lib.sh).
phase_in_background kubernetes k8s_after_helm
phase deps make -s deps
phase_in_background test-deps make -s test-deps  # Helm, promtool, Chromium: the unit tests'
phase_in_background bring-up builds_and_bring_up
phase_in_background tools tools_after_k8s
phase lint make -s lint
phase go-test go_test
wait_background test-deps
phase unit pytest -m "not cluster" -n "$WORKERS" --junitxml="$REPORT/unit.xml" "${EXTRA[@]}"
wait_background kubernetes
wait_background bring-up
# tests go to whichever worker is free, but for the groups of tests/conftest.py
phase cluster pytest -m "cluster and not solo" -n "$CLUSTER_WORKERS" --dist loadgroup \
  --junitxml="$REPORT/cluster.xml" "${EXTRA[@]}"
# Not waiting for the tools: each solo test that needs one starts after those that need none,
# and waits for its tool's build if it is still under way (tests/cluster/conftest.py).
phase solo pytest -m "cluster and solo" --junitxml="$REPORT/solo.xml" "${EXTRA[@]}"
wait_background tools
exit "$failed"
