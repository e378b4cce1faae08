#!/usr/bin/env bash
# make demo: the local cluster, the CRD and RBAC, the operator (on this host, stopped at
# the end), one example applied and waited for, then `kubectl get cx` and its summary.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
export KUBECONFIG="$KUBECONFIG_FILE"
export PATH="$ROOT/.venv/bin:$PATH"
KUBECTL="$K8S_BIN/kubectl"   # the cluster's own, not whichever kubectl the host has
EXAMPLE="${EXAMPLE:-manifests/examples/cluster-demo.yaml}"
NAME="$(python -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["metadata"]["name"])' "$EXAMPLE")"
NAMESPACE=default
LOG=$CLUSTER/logs/operator-demo.log

"$KUBECTL" apply -f manifests/crds/ -f manifests/rbac/
crds_established 60 concurrencyexperiments.cxlab.dev experimentschedules.cxlab.dev

cxlab operator --health-port 0 >"$LOG" 2>&1 &
operator=$!
trap 'kill "$operator" 2>/dev/null; wait "$operator" 2>/dev/null || true' EXIT
echo "operator running (pid $operator, log ${LOG#"$ROOT"/})"

"$KUBECTL" -n "$NAMESPACE" delete cx "$NAME" --ignore-not-found --wait=true >/dev/null
"$KUBECTL" -n "$NAMESPACE" apply -f "$EXAMPLE"
# The terminal phase is written only once the results it points at are stored: the summary
# below reads them at once (as a pipeline would after kubectl wait --for=condition=Complete).
for _ in $(seq 1 600); do
  phase="$("$KUBECTL" -n "$NAMESPACE" get cx "$NAME" -o jsonpath='{.status.phase}')"
  progress="$("$KUBECTL" -n "$NAMESPACE" get cx "$NAME" -o jsonpath='{.status.progress.display}')"
  printf '\r%s: %-10s %s ' "$NAME" "${phase:-Pending}" "$progress"
  case "$phase" in Succeeded|Failed) break ;; esac
  sleep 1
done
echo
"$KUBECTL" -n "$NAMESPACE" get cx
echo
cxlab summary "cx/$NAME" -n "$NAMESPACE"
echo
echo "The cluster stays up for you (kubectl with KUBECONFIG=$KUBECONFIG); make cluster-down stops it."
