#!/usr/bin/env bash
# Cold bring-ups on a loaded machine, the way a fresh CI machine meets them: for each round,
# remove build/cluster (state, certificates, the image store: only the built binaries and
# image tarballs stay), keep every core busy with a CPU hog for the whole of `make
# cluster-up`, check that a watch started from a fresh list works (etcd must send progress
# notifications), then `make cluster-down` and check that no process of the cluster is left.
# Last, one bring-up in which the kubelet fails to start (CXLAB_BRINGUP_FAULT): it must fail
# naming the kubelet with the end of its log and leave nothing running, and the next
# bring-up must work.
#   hack/stress-bring-up.sh [ROUNDS]      (make stress-cluster-up ROUNDS=5)
# Takes this checkout's cluster down first if it runs. Exit 0 only if every round passed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

rounds=${1:-5}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "usage: $0 [ROUNDS]"
[[ $(id -u) == 0 ]] || die "needs root, like cluster-up"
cd "$ROOT"

hogs=()
stop_hogs() {
  if ((${#hogs[@]})); then
    kill "${hogs[@]}" 2>/dev/null || true
    wait "${hogs[@]}" 2>/dev/null || true
  fi
  hogs=()
}
trap stop_hogs EXIT
start_hogs() {
  local i
  for ((i = 0; i < $(nproc); i++)); do
    bash -c 'while :; do :; done' &
    hogs+=($!)
  done
}

# Our processes: every component runs from build/ (binaries in build/k8s/bin, containerd with
# its config, the shims with its socket, all under build/cluster).
leftovers() { pgrep -a -f -- "$CLUSTER/|$K8S_BIN/" || true; }

# A watch from the resourceVersion of a fresh list must not fail with "Too large resource
# version": the apiserver's watch cache only advances on etcd's progress notifications.
watch_works() {
  local rv out
  rv=$(api /api/v1/namespaces/default/configmaps | jq -r .metadata.resourceVersion) || return 1
  out=$(api "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=$rv&timeoutSeconds=5" --max-time 15 || true)
  ! grep -q 'Too large resource version' <<<"$out"
}

make -s cluster-down
passed=0 times=()
for ((r = 1; r <= rounds; r++)); do
  rm -rf "$CLUSTER"
  log "round $r/$rounds: cold bring-up with $(nproc) cores busy"
  start_hogs
  began=$SECONDS
  if make -s cluster-up; then
    up=$((SECONDS - began))
    stop_hogs
    if watch_works; then ok=1; else ok=0; log "round $r: a watch from a fresh list failed"; fi
  else
    up=$((SECONDS - began)) ok=0
    stop_hogs
    log "round $r: cluster-up failed after $up s"
  fi
  make -s cluster-down
  left=$(leftovers)
  if [[ -n $left ]]; then
    ok=0
    log "round $r: left running after cluster-down:"$'\n'"$left"
  fi
  times+=("$up")
  if ((ok)); then passed=$((passed + 1)); fi
  log "round $r: $( ((ok)) && echo passed || echo FAILED), bring-up $up s"
done
log "stress: $passed/$rounds cold bring-ups passed; bring-up times (s): ${times[*]}"

log "failure path: a bring-up whose kubelet cannot start"
fault=1
if out=$(CXLAB_BRINGUP_FAULT=kubelet make -s cluster-up 2>&1); then
  fault=0; log "failure path: cluster-up succeeded although the kubelet could not start"
fi
if ! grep -q 'error: kubelet exited' <<<"$out" ||
   ! grep -q -- '--- last lines of build/cluster/logs/kubelet.log' <<<"$out"; then
  fault=0; log "failure path: the error does not name the kubelet with its log's tail:"$'\n'"$(tail -20 <<<"$out")"
fi
left=$(leftovers)
[[ -z $left ]] || { fault=0; log "failure path: left running after the failed bring-up:"$'\n'"$left"; }
make -s cluster-up || { fault=0; log "failure path: the next cluster-up failed"; }
make -s cluster-down
[[ -z $(leftovers) ]] || fault=0
log "failure path: $( ((fault)) && echo passed || echo FAILED)"
((passed == rounds && fault))
