#!/usr/bin/env bash
# make demo: the local cluster, the CRD and RBAC, the operator (on this host, stopped at
# the end), one example applied and waited for, then `kubectl get cx` and its summary.
set -euo pipefail
cd "$(dirname "$0")/.."
export KUBECONFIG="$PWD/build/cluster/kubeconfig"
EXAMPLE="${EXAMPLE:-manifests/examples/cluster-demo.yaml}"
NAME="$(python -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["metadata"]["name"])' "$EXAMPLE")"
LOG=build/cluster/logs/operator-demo.log

kubectl apply -f manifests/crds/ -f manifests/rbac/
kubectl wait --for condition=established --timeout=60s crd/concurrencyexperiments.cxlab.dev crd/experimentschedules.cxlab.dev

cxlab operator --health-port 0 >"$LOG" 2>&1 &
operator=$!
trap 'kill "$operator" 2>/dev/null; wait "$operator" 2>/dev/null || true' EXIT
echo "operator running (pid $operator, log $LOG)"

kubectl delete cx "$NAME" --ignore-not-found --wait=true >/dev/null
kubectl apply -f "$EXAMPLE"
for _ in $(seq 1 600); do
  phase="$(kubectl get cx "$NAME" -o jsonpath='{.status.phase}')"
  progress="$(kubectl get cx "$NAME" -o jsonpath='{.status.progress.display}')"
  printf '\r%s: %-10s %s ' "$NAME" "${phase:-Pending}" "$progress"
  case "$phase" in Succeeded|Failed) break ;; esac
  sleep 1
done
echo
kubectl get cx
echo
kubectl get cx "$NAME" -o json | cxlab summary -
echo
echo "The cluster stays up for you (kubectl with KUBECONFIG=$KUBECONFIG); make cluster-down stops it."
