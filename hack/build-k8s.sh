#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy and
# kubectl v1.32.4, etcd at the version Kubernetes 1.32 pins (3.5.16) and CoreDNS 1.12.0 (the
# plugins kubeadm's Corefile uses), from the Go module proxy (module hack/k8s) into the
# machine-wide cache (lib.sh), linked into build/k8s/bin/.
# Builds only when no checkout of this machine built them from the same go.mod, go.sum, flags
# and Go. Helm, KWOK and Kueue come from the same module (helm.sh, kwok.sh, kueue.sh) with the
# same compile flags, so the packages they share with Kubernetes (client-go, api, apimachinery,
# ...; four fifths of KWOK) are compiled once, whichever is built first.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

MOD="$ROOT/hack/k8s"
major=${K8S_VERSION#v}; major=${major%%.*}
minor=${K8S_VERSION#v*.}; minor=${minor%%.*}
# Without these the servers report v0.0.0-master+$Format:%H$, which kubectl cannot parse.
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

want=$(hash_inputs "$MOD/go.mod" "$MOD/go.sum" "$MOD/etcd" "$MOD/coredns" -- "$ldflags" "$(go version)")
build() { # out
  log "building Kubernetes $K8S_VERSION (cold: 4 minutes on an idle machine, 16 on two busy cores, and 3 GB of Go build cache)"
  local start=$SECONDS
  local c pkgs=()
  for c in "${K8S_COMPONENTS[@]}"; do
    [[ -d $MOD/$c ]] && pkgs+=("./$c") || pkgs+=("k8s.io/kubernetes/cmd/$c")
  done
  go_build_in "$MOD" -ldflags "$ldflags" -o "$1/" "${pkgs[@]}"
  log "built ${K8S_COMPONENTS[*]} in $((SECONDS - start)) s"
}
from_cache k8s "$want" "$K8S_BIN" build
for c in "${K8S_COMPONENTS[@]}"; do [[ -x $K8S_BIN/$c ]] || die "no $c in ${K8S_BIN#"$ROOT"/}"; done
