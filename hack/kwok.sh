#!/usr/bin/env bash
# KWOK (sigs.k8s.io/kwok, "Kubernetes WithOut Kubelet") next to the local cluster: fake nodes
# for the operator at scale. hack/kwok.sh start [N]|stop|status|build
#
# KWOK v0.6.1, the last release on Kubernetes 1.32's libraries: built from the Go module proxy
# in module hack/k8s beside Kubernetes (build-k8s.sh), whose compiled packages it mostly
# shares, into build/kwok/bin/. It runs on the host with the cluster's admin kubeconfig and plays the kubelet
# for the nodes labelled type=kwok only: N of them (100 by default), each 32 CPUs, 128 GiB and
# 110 Pods, tainted kwok.x-k8s.io/node=fake:NoSchedule so that only Pods tolerating it (the
# scale benchmark's and tests' trials) land there. Its Stages (hack/kwok/stages.yaml) start
# the Pods and end cxlab's trial Pods with a Result, 2 % with a failure. The real apiserver,
# scheduler and controllers handle everything else: the operator's code path is the real one.
# `stop` stops exactly the process `start` recorded and deletes the fake nodes (their Pods
# go with them).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

KWOK="$BUILD/kwok"
KWOK_BIN="$KWOK/bin/kwok"
STAGES="$ROOT/hack/kwok/stages.yaml"
PID_FILE="$CLUSTER/pids/kwok.pid"           # cluster-down stops it too
NODES=${2:-${KWOK_NODES:-100}}
LABEL=type=kwok
FAKE_POD_CIDR=10.128.0.0/16  # the fake Pods' IPs (KWOK --cidr): room for every Pod of 100 busy nodes
KUBECTL="$K8S_BIN/kubectl"
export KUBECONFIG="$KUBECONFIG_FILE"

build() { build_tool_module "$ROOT/hack/k8s" sigs.k8s.io/kwok/cmd/kwok "$KWOK" KWOK 1-2; }

running_pid() { component_pid kwok; }

nodes() { # create the fake nodes 0..N-1 that do not exist yet
  local i manifest=""
  for ((i = 0; i < NODES; i++)); do
    manifest+="---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  labels: {type: kwok, kubernetes.io/hostname: kwok-node-$i, kubernetes.io/os: linux, kubernetes.io/arch: amd64}
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: \"0\"}
spec:
  taints: [{key: kwok.x-k8s.io/node, value: fake, effect: NoSchedule}]
status:
  allocatable: {cpu: \"32\", memory: 128Gi, pods: \"110\"}
  capacity: {cpu: \"32\", memory: 128Gi, pods: \"110\"}
"
  done
  # create, not apply: an existing node keeps its state (and status is not applied anyway)
  "$KUBECTL" create -f - <<<"$manifest" 2>&1 | grep -v "AlreadyExists" >/dev/null || true
}

wait_ready() {
  local deadline=$((SECONDS + 120)) ready
  while :; do
    ready=$("$KUBECTL" get nodes -l "$LABEL" --no-headers 2>/dev/null | awk '$2 == "Ready"' | wc -l)
    ((ready >= NODES)) && break
    if ! running_pid >/dev/null; then
      log "error: KWOK exited as it started"
      log_tail "$KWOK/kwok.log" >&2
      exit 1
    fi
    ((SECONDS < deadline)) || { log "error: $ready of $NODES fake nodes Ready after 120 s"; log_tail "$KWOK/kwok.log" >&2; exit 1; }
    sleep 0.5
  done
}

start() {
  [[ -f $KUBECONFIG_FILE ]] || die "no cluster: make cluster-up first"
  build
  local pid stages
  stages=$(hash_inputs "$STAGES")
  if pid=$(running_pid) && [[ $(cat "$KWOK/stages.inputs" 2>/dev/null) != "$stages" ]]; then
    log "hack/kwok/stages.yaml changed since KWOK started: starting it again"
    stop
  fi
  if ! pid=$(running_pid); then
    mkdir -p "$CLUSTER/pids"
    # --node-lease-duration-seconds: KWOK renews each node's Lease as a kubelet does (the node
    # controller would otherwise mark the nodes NotReady after 40 s and evict their Pods); the
    # node status itself changes rarely (the heartbeat Stage), so 100 nodes cost little.
    start_tool KWOK "$PID_FILE" "$KWOK/kwok.log" "$KWOK_BIN" \
      --kubeconfig="$KUBECONFIG_FILE" \
      --manage-nodes-with-label-selector="$LABEL" \
      --config="$STAGES" \
      --node-lease-duration-seconds=40 \
      --cidr="$FAKE_POD_CIDR" \
      --node-ip=192.0.2.200 \
      --v="${KWOK_LOG_LEVEL:-WARN}"
    read -r pid _ < "$PID_FILE"
    echo "$stages" > "$KWOK/stages.inputs"
  fi
  # No process answers on a fake Pod's IP: a connect there (the operator's progress read of
  # a trial) waited its whole timeout (1 s of a pass thread) for a SYN nobody answers. An
  # unreachable route fails it at once, as a Pod that is gone does.
  ip route replace unreachable "$FAKE_POD_CIDR"
  nodes
  wait_ready
  log "KWOK runs (pid $pid): $NODES fake nodes Ready ($LABEL, taint kwok.x-k8s.io/node=fake:NoSchedule)"
}

stop() {
  local pid
  if [[ -f $KUBECONFIG_FILE ]] && "$KUBECTL" get nodes -l "$LABEL" -o name 2>/dev/null | grep -q .; then
    # their Pods first, at once: no kubelet confirms their end once KWOK is gone
    "$KUBECTL" get pods -A --field-selector spec.nodeName!= -o json 2>/dev/null \
      | "$ROOT/.venv/bin/python" -c '
import json, sys
for pod in json.load(sys.stdin)["items"]:
    if pod["spec"].get("nodeName", "").startswith("kwok-node-"):
        print(pod["metadata"]["namespace"], pod["metadata"]["name"])' \
      | while read -r namespace name; do
          "$KUBECTL" delete pod -n "$namespace" "$name" --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
        done
    "$KUBECTL" delete nodes -l "$LABEL" --timeout=60s >/dev/null 2>&1 || true
    # and their Leases, which the garbage collector would take a while over: nodes of the same
    # names started again at once would otherwise meet their old Leases
    "$KUBECTL" get leases -n kube-node-lease -o name 2>/dev/null | grep '/kwok-node-' \
      | xargs -r "$KUBECTL" delete -n kube-node-lease --timeout=60s >/dev/null 2>&1 || true
  fi
  if pid=$(running_pid); then
    stop_pid "$pid" kwok 20
  fi
  ip route del unreachable "$FAKE_POD_CIDR" 2>/dev/null || true
  rm -f "$PID_FILE"
  log "KWOK stopped, its fake nodes deleted"
}

tool_main "build|start [nodes]|stop|status" "$@"
