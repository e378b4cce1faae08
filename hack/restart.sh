#!/usr/bin/env bash
# Restart one component of the local cluster with the arguments it runs with, and wait until
# it answers again: hack/restart.sh etcd|kube-apiserver. For the chaos runs of
# `make bench-scale` (CXLAB_SCALE_CHAOS=1): what an upgrade or a crash of the control plane
# does to the operator's watches and writes mid-run.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

name=${1:?usage: hack/restart.sh etcd|kube-apiserver}
case $name in
  etcd) ok() { [[ $(curl -sf --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" | jq -r .health 2>/dev/null) == true ]]; } ;;
  kube-apiserver) ok() { [[ $(api /readyz 2>/dev/null) == ok ]]; } ;;
  *) die "hack/restart.sh restarts etcd or kube-apiserver, not $name" ;;
esac
pid=$(component_pid "$name") || die "$name is not running (make cluster-up)"
mapfile -d '' args < "/proc/$pid/cmdline"
exe=$(readlink -f "/proc/$pid/exe")
began=$SECONDS
kill -TERM "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -KILL "$pid" 2>/dev/null || true  # still there after 10 s
start_detached "$CLUSTER/pids/$name.pid" "$CLUSTER/logs/$name.log" --as "$exe" "${args[@]}" \
  || die "$name exited as it started again (log: build/cluster/logs/$name.log)"
deadline=$((SECONDS + 120))
until ok; do
  ((SECONDS < deadline)) || die "$name not ready 120 s after its restart (log: build/cluster/logs/$name.log)"
  sleep 0.25
done
log "$name restarted: answering again $((SECONDS - began)) s after it was stopped"
