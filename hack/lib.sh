# shellcheck shell=bash disable=SC2034
# Shared settings of the hack/ scripts; sourced, not run.
# Every output of these scripts lives under build/ (git-ignored).

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"
K8S_BIN="$BUILD/k8s/bin"
# At its default GOGC (100) the Go compiler spends a seventh to a fifth of a cold build's CPU
# collecting garbage: with 400, client-go and the apiserver's library took 404 CPU-s instead of
# 501, Kubernetes' core validation 443 instead of 511, its largest compile 692 MiB instead of
# 460. Only for the builds (go_build_in): what they build runs with its own.
GO_BUILD_GOGC=${GO_BUILD_GOGC:-400}
CLUSTER="$BUILD/cluster"        # cluster state: pki, etcd, containerd, kubelet, logs, pids
IMAGES="$BUILD/images"          # image build folders, tarballs and their input hashes
K8S_VERSION=v1.32.4
# built by build-k8s.sh from hack/k8s: Kubernetes' own, etcd at the version Kubernetes pins and
# CoreDNS (the cluster's DNS); those two from the module's own packages (hack/k8s/<name>/)
K8S_COMPONENTS=(etcd coredns kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

CONTAINERD_SOCK="$CLUSTER/containerd/containerd.sock"
KUBECONFIG_FILE="$CLUSTER/kubeconfig"
PAUSE_IMAGE=cxlab.dev/pause:dev
RUNNER_IMAGE=cxlab.dev/runner:dev
OPERATOR_IMAGE=cxlab.dev/operator:dev
HTTPBIN_IMAGE=cxlab.dev/httpbin:dev

# The Go checksum database does not answer for k8s.io/kubernetes here; go.sum pins the modules.
export GOSUMDB=off

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Install Debian packages for the commands that are missing:
#   need_pkgs [--recommends] cmd:package ...
# One apt at a time: make test installs in phases that run side by side (hack/test.sh).
need_pkgs() {
  local missing=() pair recommends=--no-install-recommends
  [[ ${1:-} == --recommends ]] && { recommends=--install-recommends; shift; }
  for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || [[ -x "${pair%%:*}" ]] || missing+=("${pair#*:}")
  done
  ((${#missing[@]})) || return 0
  [[ $(id -u) == 0 ]] || die "need root to install: ${missing[*]}"
  log "installing Debian packages: ${missing[*]}"
  (
    exec 9>/var/lock/cxlab-apt.lock
    flock 9
    if [[ -z $(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mmin -1440 2>/dev/null | head -1) ]]; then
      apt-get -o DPkg::Lock::Timeout=600 update -qq
    fi
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
      "$recommends" "${missing[@]}" >/dev/null
  )
}

# sha256 over files (contents and names relative to the file or folder given) and extra
# strings: hash_inputs FILE... -- STRING... The same for the same inputs in any checkout, so
# that the machine-wide cache (below) is shared by them.
hash_inputs() {
  {
    while (($#)) && [[ $1 != -- ]]; do
      if [[ -d $1 ]]; then
        (cd "$1" && find . -type f ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
      else
        printf '%s  %s\n' "$(sha256sum < "$1" | cut -d' ' -f1)" "$(basename "$1")"
      fi
      shift
    done
    [[ ${1:-} == -- ]] && shift
    printf '%s\n' "$@"
  } | sha256sum | cut -d' ' -f1
}

# ---- the machine-wide cache ----------------------------------------------------------------
# What does not depend on the checkout (Kubernetes and etcd, Kueue, KWOK, Helm, Prometheus, the
# images' Debian base) is built once per machine and version, into $CACHE/<name>/<inputs hash>/,
# and linked from there into a checkout's build/: a fresh clone on a machine that built them
# once starts its cluster in about a minute. `make clean-cache` empties it.
CACHE=${CXLAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cxlab}

# from_cache NAME HASH DEST BUILD [ARGS...]: the folder DEST (under build/) holds NAME built
# from the inputs HASH, hard-linked (or copied) from the cache; the first time on the machine
# `BUILD OUT ARGS...` builds it into the folder OUT. Built under a lock (two checkouts build it
# once) into a temporary folder renamed when done (a build cut short leaves nothing behind).
# DEST/.inputs skips all of it while the hash is the same.
from_cache() {
  local name=$1 hash=$2 dest=$3 build=$4 dir=$CACHE/$1/$2; shift 4
  if [[ $(cat "$dest/.inputs" 2>/dev/null) == "$hash" ]] && [[ -n $(ls -A "$dest" 2>/dev/null | grep -v '^\.inputs$') ]]; then
    return 0
  fi
  mkdir -p "$CACHE/$name"
  (
    # Linked under the lock too: two makes of one checkout may ask at once (make test starts
    # the Kubernetes build early, its bring-up asks again).
    exec 8>"$CACHE/$name/.lock"
    if ! flock -n 8; then
      log "waiting for another build of $name into the cache"
      flock 8
    fi
    if [[ ! -f $dir/.complete ]]; then
      rm -rf "$dir.partial" && mkdir -p "$dir.partial"
      "$build" "$dir.partial" "$@"
      touch "$dir.partial/.complete"
      rm -rf "$dir" && mv "$dir.partial" "$dir"
    fi
    [[ $(cat "$dest/.inputs" 2>/dev/null) == "$hash" ]] && exit 0
    rm -rf "$dest" && mkdir -p "$dest"
    cp -al "$dir/." "$dest/" 2>/dev/null || cp -a "$dir/." "$dest/"
    rm -f "$dest/.complete"
    echo "$hash" > "$dest/.inputs"
  )
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
DNS_SERVICE_IP=10.96.0.10     # the "kube-dns" Service, the kubelet's clusterDNS (kubeadm's)
DNS_PORT=10053                # CoreDNS on the node's IP; kube-dns's port 53 leads there
DNS_HEALTH_PORT=18180         # CoreDNS's health, ready and metrics (prometheus) plugins,
DNS_READY_PORT=18181          # on 127.0.0.1
DNS_METRICS_PORT=19153
METRICS_SERVER_PORT=10443     # metrics-server on the node's IP; the metrics.k8s.io APIService leads there
POD_CIDR=10.244.0.0/24        # the bridge CNI network of the one node
CLUSTER_CIDR=10.244.0.0/16
CNI_BRIDGE=cni0
# start order; cluster-down stops them in reverse
COMPONENTS=(etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy coredns metrics-server)

node_name() { hostname | tr '[:upper:]' '[:lower:]'; }
node_ip() {
  ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -1 | grep . ||
    hostname -I | awk '{print $1}'
}

# The executable a process runs now, or nothing if it is gone or a zombie. Right after a fork
# this is still the shell (bash, or setsid on its way to exec): "not exec'd yet" is not "exited".
exe_of() {
  local stat exe
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]] || return 1
  exe=$(readlink "/proc/$1/exe" 2>/dev/null) || return 1
  echo "${exe% (deleted)}"
}

# The pid of a component if the process cluster-up recorded for it still runs that executable:
# component_pid name [root] (root: another checkout's, to see whether its cluster runs).
component_pid() {
  local pid exe pids=${2:-$ROOT}/build/cluster/pids
  [[ -f $pids/$1.pid ]] || return 1
  read -r pid exe < "$pids/$1.pid" || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ $(exe_of "$pid") == "$exe" ]] || return 1
  echo "$pid"
}

# `go build` in a module with the compile flags of every build of hack/: builds from one module
# (hack/k8s: Kubernetes, etcd, Helm, KWOK) then share each package they have in common through
# the Go build cache. go_build_in MODULE_DIR [go build arguments...]
go_build_in() {
  (cd "$1" && shift && GOGC=$GO_BUILD_GOGC CGO_ENABLED=0 go build -mod=readonly -trimpath "$@")
}

# A Go program built from a module of hack/ that names it with a `tool` directive: into
# DIR/bin/ from the cache, built again only when the module's go.mod/go.sum or Go itself
# changed. build_tool_module MODULE_DIR PACKAGE DIR NAME MINUTES
build_tool_module() {
  local mod=$1 pkg=$2 dir=$3 name=$4 minutes=$5
  from_cache "$(basename "$dir")" "$(hash_inputs "$mod/go.mod" "$mod/go.sum" -- "$pkg" "$(go version)")" \
    "$dir/bin" _build_tool "$mod" "$pkg" "$name" "$minutes"
}
_build_tool() { # out module package name minutes
  log "building $4 from the Go module proxy (about $5 min cold)"
  go_build_in "$2" -ldflags "-s -w" -o "$1/" "$3"
}

# `kubectl wait --for=condition=Established` just after an apply fails at once when the CRD
# has no status yet (".status.conditions accessor error: <nil>", seen with kubectl 1.32):
# ask for the condition until it holds. crds_established SECONDS CRD...
crds_established() {
  local deadline=$((SECONDS + $1)) crd; shift
  local established='{.status.conditions[?(@.type=="Established")].status}'
  for crd in "$@"; do
    until [[ $("$K8S_BIN/kubectl" get "crd/$crd" -o "jsonpath=$established" 2>/dev/null) == True ]]; do
      ((SECONDS < deadline)) || die "the CRD $crd was not Established within $1 s"
      sleep 0.5
    done
  done
}

# Stopping a process by the pid recorded for it.
pid_gone() { ! kill -0 "$1" 2>/dev/null; }
stop_pid() { # pid name seconds: SIGTERM, then SIGKILL after a grace period
  local pid=$1 name=$2 began=$SECONDS deadline=$((SECONDS + $3))
  kill -TERM "$pid" 2>/dev/null || return 0
  until pid_gone "$pid"; do
    if ((SECONDS >= deadline)); then
      log "$name ($pid) did not stop in $3 s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null
      sleep 0.2
      return 0
    fi
    sleep 0.1
  done
  ((SECONDS - began < 5)) || log "$name took $((SECONDS - began)) s to stop"
}

# Start a long-running program detached (own session, stdin closed, output appended to a log)
# and record "<pid> <executable>" in a pid file. Returns once the process runs the program:
# on a busy machine the fork can take seconds to exec, and a check made before then would see
# the shell. Fails (1) if it exits first, or has not exec'd within 60 s.
# --as EXE: the command execs EXE in the end (a wrapper that sets something up, then `exec`s):
# the pid is recorded as EXE's, once it runs.
start_detached() { # pidfile logfile [--as EXE] executable args...
  local pidfile=$1 logfile=$2 exe pid deadline; shift 2
  if [[ $1 == --as ]]; then
    exe=$(readlink -f "$2"); shift 2
  else
    exe=$(readlink -f "$(command -v "$1")")
  fi
  [[ -x $exe ]] || { log "error: no executable $exe"; return 1; }
  echo "=== $(date -Is) $*" >> "$logfile"
  # without job control the background child leads no process group, so setsid execs in place
  # (no second fork) and $! is the program's own pid
  setsid "$@" >> "$logfile" 2>&1 < /dev/null 9>&- &
  pid=$!
  echo "$pid $exe" > "$pidfile"
  deadline=$((SECONDS + 60))
  until [[ $(exe_of "$pid") == "$exe" ]]; do
    kill -0 "$pid" 2>/dev/null && [[ $(cat "/proc/$pid/stat" 2>/dev/null) != *") Z "* ]] || return 1
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
}

# A tool beside the cluster (Kueue, KWOK) started detached, or its failure said (the end of its
# log) and the script ended: start_tool name pidfile logfile executable args...
start_tool() {
  local name=$1 pidfile=$2 logfile=$3; shift 3
  if ! start_detached "$pidfile" "$logfile" "$@"; then
    log "error: $name exited as it started"
    log_tail "$logfile" >&2
    rm -f "$pidfile"
    exit 1
  fi
}

# The commands of such a tool's script: build, start, stop and status, the script's functions
# of those names (status: its running_pid). tool_main "usage" "$@"
tool_main() {
  local usage=$1; shift
  case ${1:-} in
    build | start | stop) "$1" ;;
    status) running_pid >/dev/null ;;
    *) die "usage: $0 $usage" ;;
  esac
}

# The last lines a log got from its latest start (start_detached marks each with "=== "),
# indented, for an error message: log_tail file [lines]
log_tail() {
  local from
  [[ -s $1 ]] || { echo "    (no output in ${1#"$ROOT"/})"; return 0; }
  from=$(grep -n '^=== ' "$1" | tail -n 1 | cut -d: -f1)
  echo "    --- last lines of ${1#"$ROOT"/} ---"
  tail -n +"${from:-1}" "$1" | tail -n "${2:-25}" | sed 's/^/    /'
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

# One cluster per machine (fixed ports, one bridge, the iptables chains): the machine-wide
# state lives in /run (gone at reboot, like the bridge and the chains it describes).
MACHINE_STATE=${CXLAB_MACHINE_STATE:-/run/cxlab}
OWNER_FILE="$MACHINE_STATE/cluster.owner"    # the checkout (ROOT) whose cluster owns cni0, KUBE-*/CNI-*

# One cluster-up, cluster-down or images run at a time on the machine, whichever checkout it
# comes from (a second one waits): the lock is $MACHINE_STATE/cluster.lock, taken once per
# process tree (child scripts see CXLAB_CLUSTER_LOCK).
cluster_lock() {
  [[ -n ${CXLAB_CLUSTER_LOCK:-} ]] && return 0
  mkdir -p "$MACHINE_STATE"
  exec 9>"$MACHINE_STATE/cluster.lock"
  if ! flock -n 9; then
    log "waiting for another cluster-up/cluster-down/images run to finish"
    flock -w 1800 9 || die "gave up waiting for $MACHINE_STATE/cluster.lock"
  fi
  export CXLAB_CLUSTER_LOCK=1
}

# The checkout whose cluster last claimed the machine's shared network state, if any.
machine_owner() { cat "$OWNER_FILE" 2>/dev/null; }
owns_machine() { [[ $(machine_owner) == "$ROOT" ]]; }
claim_machine() { mkdir -p "$MACHINE_STATE" && echo "$ROOT" > "$OWNER_FILE"; }

# Whether any component of the cluster started from checkout $1 still runs.
cluster_runs_at() {
  local c
  for c in "${COMPONENTS[@]}"; do component_pid "$c" "$1" >/dev/null && return 0; done
  return 1
}
