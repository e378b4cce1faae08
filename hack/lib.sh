# shellcheck shell=bash disable=SC2034
# Shared settings of the hack/ scripts; sourced, not run.
# Every output of these scripts lives under build/ (git-ignored).

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"
K8S_BIN="$BUILD/k8s/bin"
CLUSTER="$BUILD/cluster"        # cluster state: pki, etcd, containerd, kubelet, logs, pids
IMAGES="$BUILD/images"          # image build folders, tarballs and their input hashes
K8S_VERSION=v1.32.4
K8S_COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

CONTAINERD_SOCK="$CLUSTER/containerd/containerd.sock"
KUBECONFIG_FILE="$CLUSTER/kubeconfig"
PAUSE_IMAGE=cxlab.dev/pause:dev
RUNNER_IMAGE=cxlab.dev/runner:dev
OPERATOR_IMAGE=cxlab.dev/operator:dev

# The Go checksum database does not answer for k8s.io/kubernetes here; go.sum pins the modules.
export GOSUMDB=off

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Install Debian packages for the commands that are missing: need_pkgs cmd:package ...
need_pkgs() {
  local missing=() pair
  for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || [[ -x "${pair%%:*}" ]] || missing+=("${pair#*:}")
  done
  ((${#missing[@]})) || return 0
  [[ $(id -u) == 0 ]] || die "need root to install: ${missing[*]}"
  log "installing Debian packages: ${missing[*]}"
  if [[ -z $(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mmin -1440 2>/dev/null | head -1) ]]; then
    apt-get update -qq
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# sha256 over files (contents and relative names) and extra strings: hash_inputs FILE... -- STRING...
hash_inputs() {
  {
    while (($#)) && [[ $1 != -- ]]; do
      if [[ -d $1 ]]; then
        (cd "$1" && find . -type f ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
      else
        sha256sum "$1"
      fi
      shift
    done
    [[ ${1:-} == -- ]] && shift
    printf '%s\n' "$@"
  } | sha256sum | cut -d' ' -f1
}

# ---- the cluster ----------------------------------------------------------------------------
PKI="$CLUSTER/pki"
LOGS="$CLUSTER/logs"
PIDS="$CLUSTER/pids"          # <component>.pid: "<pid> <executable>" of what cluster-up started
ETCD_PORT=12379               # not 2379: stays clear of an etcd the etcd-server package may run
ETCD_PEER_PORT=12380
API_PORT=6443
SERVICE_CIDR=10.96.0.0/12
SERVICE_IP=10.96.0.1          # the "kubernetes" Service, in the apiserver certificate
POD_CIDR=10.244.0.0/24        # the bridge CNI network of the one node
CLUSTER_CIDR=10.244.0.0/16
CNI_BRIDGE=cni0
# start order; cluster-down stops them in reverse
COMPONENTS=(etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)

node_name() { hostname | tr '[:upper:]' '[:lower:]'; }
node_ip() {
  ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -1 | grep . ||
    hostname -I | awk '{print $1}'
}

# The pid of a component if the process cluster-up recorded for it still runs that executable.
component_pid() {
  local pid exe actual
  [[ -f $PIDS/$1.pid ]] || return 1
  read -r pid exe < "$PIDS/$1.pid" || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  actual=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [[ ${actual% (deleted)} == "$exe" ]] || return 1
  echo "$pid"
}

# curl against the apiserver with the admin certificate: api PATH [curl options]
api() {
  local path=$1; shift
  curl -sf --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "$@" "https://127.0.0.1:$API_PORT$path"
}

node_ready() {
  api "/api/v1/nodes/$(node_name)" |
    jq -e '.status.conditions[] | select(.type == "Ready") | .status == "True"' >/dev/null 2>&1
}

# One cluster-up, cluster-down or images run at a time (a second one waits): the lock is
# build/.cluster.lock, taken once per process tree (child scripts see CXLAB_CLUSTER_LOCK).
cluster_lock() {
  [[ -n ${CXLAB_CLUSTER_LOCK:-} ]] && return 0
  mkdir -p "$BUILD"
  exec 9>"$BUILD/.cluster.lock"
  if ! flock -n 9; then
    log "waiting for another cluster-up/cluster-down/images run to finish"
    flock -w 1800 9 || die "gave up waiting for $BUILD/.cluster.lock"
  fi
  export CXLAB_CLUSTER_LOCK=1
}
