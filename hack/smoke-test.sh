#!/usr/bin/env bash
# Checks a running local cluster (make cluster-up) end to end, in namespace cxlab-smoke,
# which it deletes again:
#   - the node is Ready
#   - a Guaranteed Pod (cpu 1, 256Mi) of cxlab.dev/runner:dev, non-root, read-only root
#     filesystem, no capabilities, RuntimeDefault seccomp, runs the Python runner and the
#     Go runner to Succeeded; the termination message is the Result and its "cpus" is [1]
#     (the core the static CPU manager gave it exclusively)
#   - cxlab-delay in a Pod answers from the host at the Pod IP and through a Service
#     ClusterIP (kube-proxy), and from another Pod, which also reaches the apiserver
#     through the "kubernetes" Service with its ServiceAccount token
# Prints the time from create to Succeeded of each runner Pod. Exit status 1 if a check failed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

NS=cxlab-smoke
export KUBECONFIG=$KUBECONFIG_FILE
KUBECTL=$K8S_BIN/kubectl
[[ -x $KUBECTL ]] || KUBECTL=kubectl
k() { "$KUBECTL" -n "$NS" "$@"; }
failed=0
pass() { printf '  ok    %s\n' "$*"; }
fail() { printf '  FAIL  %s\n' "$*"; failed=1; }

node_ready || die "the cluster is not up (make cluster-up)"
pass "node $(node_name) Ready"
"$KUBECTL" delete namespace "$NS" --ignore-not-found --wait >/dev/null
"$KUBECTL" create namespace "$NS" >/dev/null
trap '"$KUBECTL" delete namespace "$NS" --wait=false >/dev/null 2>&1 || true' EXIT
# the controller-manager makes the namespace's ServiceAccount; bounded, like every wait here
for ((i = 0; i < 300; i++)); do k get serviceaccount default >/dev/null 2>&1 && break; sleep 0.2; done
k get serviceaccount default >/dev/null || die "no ServiceAccount default in $NS after 60 s (kube-controller-manager's log)"

SECURITY='{"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]}}'
pod() { # name command-json resources-json [labels-json]
  cat <<EOF
{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "$1", "labels": ${4:-{\}}},
 "spec": {"restartPolicy": "Never",
   "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
                       "seccompProfile": {"type": "RuntimeDefault"}},
   "containers": [{"name": "main", "image": "$RUNNER_IMAGE", "imagePullPolicy": "Never",
     "command": $2, "resources": $3, "securityContext": $SECURITY}]}}
EOF
}
GUARANTEED='{"requests": {"cpu": "1", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}'

phase() { k get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
wait_done() { # name seconds -> phase
  local deadline=$((SECONDS + $2)) p
  while p=$(phase "$1"); [[ $p != Succeeded && $p != Failed ]]; do
    ((SECONDS < deadline)) || break
    sleep 0.1
  done
  echo "$p"
}

runner_pod() { # name command-json
  local t0 p ms msg
  t0=$(date +%s%N)
  pod "$1" "$2" "$GUARANTEED" | k apply -f - >/dev/null
  p=$(wait_done "$1" 60)
  ms=$((($(date +%s%N) - t0) / 1000000))
  msg=$(k get pod "$1" -o jsonpath='{.status.containerStatuses[0].state.terminated.message}')
  if [[ $p != Succeeded ]]; then
    fail "$1: phase ${p:-unknown} after ${ms} ms; log: $(k logs "$1" 2>&1 | tail -1)"
  elif ! jq -e '.schema == "cxlab.dev/result/v1"' <<<"$msg" >/dev/null 2>&1; then
    fail "$1: Succeeded, but the termination message is not a Result: ${msg:0:200}"
  elif [[ $(jq -c .cpus <<<"$msg") != "[1]" ]]; then
    fail "$1: Succeeded in ${ms} ms, but cpus is $(jq -c .cpus <<<"$msg"), not [1]"
  else
    pass "$1: Succeeded in ${ms} ms (create → Succeeded), QoS $(k get pod "$1" -o jsonpath='{.status.qosClass}'), Result $(jq -c '{model, tasksOk, wallSeconds, cpus}' <<<"$msg")"
  fi
}

runner_pod runner-python '["python3", "-m", "cxlab_runner", "--model", "asyncio", "--workload", "sleep", "--tasks", "100", "--rtt", "50ms", "--result-path", "/dev/termination-log"]'
runner_pod runner-go '["cxlab-runner-go", "--model", "goroutines", "--workload", "sleep", "--tasks", "100", "--rtt", "50ms", "--result-path", "/dev/termination-log"]'

# the delay target, its Service, and a client Pod
pod delay '["cxlab-delay", "--listen", ":8080"]' '{}' '{"app": "delay"}' | k apply -f - >/dev/null
k create service clusterip delay --tcp=80:8080 >/dev/null
k set selector service delay app=delay >/dev/null
k wait --for=condition=Ready pod/delay --timeout=60s >/dev/null
pod_ip=$(k get pod delay -o jsonpath='{.status.podIP}')
svc_ip=$(k get service delay -o jsonpath='{.spec.clusterIP}')
if [[ $(curl -s -m 5 "http://$pod_ip:8080/healthz") == ok ]]; then
  pass "host → Pod IP: curl http://$pod_ip:8080/healthz"
else
  fail "host → Pod IP: curl http://$pod_ip:8080/healthz"
fi
# kube-proxy may need a moment to program a new Service
for _ in $(seq 50); do curl -sf -m 2 "http://$svc_ip/healthz" >/dev/null && break; sleep 0.2; done
if [[ $(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://$svc_ip/?rtt=20ms") == 200 ]]; then
  pass "host → Service ClusterIP: curl http://$svc_ip/?rtt=20ms"
else
  fail "host → Service ClusterIP: curl http://$svc_ip/?rtt=20ms"
fi

client='import json, os, ssl, urllib.request as u
print("pod", u.urlopen("http://'$pod_ip':8080/healthz", timeout=5).status)
print("service", u.urlopen("http://'$svc_ip'/?rtt=20ms", timeout=5).status)
sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
req = u.Request("https://" + os.environ["KUBERNETES_SERVICE_HOST"] + "/version",
                headers={"Authorization": "Bearer " + open(sa + "token").read()})
ctx = ssl.create_default_context(cafile=sa + "ca.crt")
print("apiserver", json.load(u.urlopen(req, timeout=5, context=ctx))["gitVersion"])'
pod client "$(jq -cn --arg c "$client" '["python3", "-c", $c]')" '{}' | k apply -f - >/dev/null
p=$(wait_done client 60)
out=$(k logs client 2>&1 | tr '\n' ' ')
if [[ $p == Succeeded ]]; then
  pass "Pod → Pod IP, Pod → Service, Pod → apiserver (kubernetes Service, token): $out"
else
  fail "client Pod: ${p:-unknown}: $out"
fi

if ((failed == 0)); then log "smoke test passed"; else log "smoke test FAILED"; fi
exit "$failed"
