#!/usr/bin/env bash
# Brings up a single-node Kubernetes v1.32.4 cluster on this machine, everything under
# build/cluster/ (see hack/README.md): etcd, containerd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet (static CPU manager) and kube-proxy
# (iptables), bridge CNI, CoreDNS (cluster.local, as kubeadm sets it up), metrics-server (the
# resource metrics API an HPA reads), the images cxlab.dev/pause:dev and cxlab.dev/runner:dev.
# Idempotent: when the cluster it started is up and healthy it only makes sure the images
# are current. A partly running or dead cluster is taken down (hack/cluster-down.sh) first.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

start=$SECONDS
[[ $(id -u) == 0 ]] || die "cluster-up needs root (containers, mounts, iptables)"
cluster_lock
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

healthy() {
  local c
  for c in "${COMPONENTS[@]}"; do component_pid "$c" >/dev/null || return 1; done
  [[ $(api /readyz 2>/dev/null) == ok ]] && node_ready
}

if [[ -f $KUBECONFIG_FILE ]] && healthy; then
  "$ROOT/hack/images.sh" --import
  log "cluster already up (KUBECONFIG=${KUBECONFIG_FILE#"$ROOT"/})"
  exit 0
fi

# ---- before touching anything: is the machine free for this checkout's cluster? ----
# Only one cluster fits on a machine (fixed ports, one bridge). Another checkout's running
# cluster is left alone: nothing of it is stopped or cleaned, and this bring-up stops here.
owner=$(machine_owner || true)
if [[ -n $owner && $owner != "$ROOT" ]] && cluster_runs_at "$owner"; then
  die "another cxlab cluster runs on this machine, started from $owner: run 'make -C $owner cluster-down' first"
fi
ours=" "
for c in "${COMPONENTS[@]}"; do pid=$(component_pid "$c") && ours+="$pid "; done
for port in $ETCD_PORT $ETCD_PEER_PORT $API_PORT 10248 10249 10250 10256 10257 10259 \
  $DNS_PORT $DNS_HEALTH_PORT $DNS_READY_PORT $DNS_METRICS_PORT $METRICS_SERVER_PORT; do
  holders=$(ss -Htlnp "sport = :$port" 2>/dev/null | grep -o "pid=[0-9]*" | cut -d= -f2 | sort -u || true)
  [[ -n $holders ]] || continue
  for pid in $holders; do
    [[ $ours == *" $pid "* ]] && continue
    die "port $port is in use by $(ps -o comm= -p "$pid" 2>/dev/null || echo "another program") (pid $pid), not by this checkout's cluster: stop it first (ss -tlnp 'sport = :$port')"
  done
done
if [[ -n $owner && $owner != "$ROOT" ]]; then
  log "the machine's cluster network state was last claimed by $owner, whose cluster does not run: taking it over"
fi
claim_machine

# Whatever a previous run of this checkout left (processes, mounts, bridge, iptables chains,
# etcd data) goes first; with nothing left this takes a fraction of a second.
if compgen -G "$PIDS/*.pid" >/dev/null; then
  log "a previous cluster is partly running or unhealthy: taking it down first"
fi
"$ROOT/hack/cluster-down.sh" 2>&1 | grep -v 'cluster down (nothing ran)' >&2 || true

need_pkgs containerd:containerd ctr:containerd runc:runc \
  /usr/lib/cni/bridge:containernetworking-plugins iptables:iptables nft:nftables conntrack:conntrack \
  openssl:openssl curl:curl jq:jq ip:iproute2 findmnt:util-linux ss:iproute2 flock:util-linux

"$ROOT/hack/build-k8s.sh"
"$ROOT/hack/metrics-server.sh"
"$ROOT/hack/images.sh" --build

NODE_NAME=$(node_name)
NODE_IP=$(node_ip)
[[ -n $NODE_IP ]] || die "cannot tell this machine's IP address"
mkdir -p "$PKI" "$LOGS" "$PIDS" "$CLUSTER/etcd" "$CLUSTER/containerd" "$CLUSTER/cni/net.d" \
  "$CLUSTER/cni/ipam" "$CLUSTER/kubelet/root" "$CLUSTER/kubelet/pod-logs" "$CLUSTER/kube-proxy"
chmod 700 "$PKI" "$CLUSTER/etcd"

# ---- certificates (kept across bring-ups; the serving one is remade when the SANs change) ----
sign() { # name subject extensions: a key and a certificate signed by the CA
  openssl genrsa -out "$PKI/$1.key" 2048 2>/dev/null
  openssl req -new -key "$PKI/$1.key" -subj "$2" -out "$PKI/$1.csr"
  openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days 3650 -sha256 -out "$PKI/$1.crt" \
    -extfile <(printf '%s\n' "basicConstraints=critical,CA:FALSE" "$3") 2>/dev/null
  rm -f "$PKI/$1.csr"
}
if ! [[ -f $PKI/ca.crt ]] || ! openssl x509 -checkend 86400 -noout -in "$PKI/ca.crt" >/dev/null; then
  log "certificates: new CA"
  rm -f "$PKI"/*
  openssl genrsa -out "$PKI/ca.key" 2048 2>/dev/null
  openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=cxlab-local-ca" -days 3650 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" -out "$PKI/ca.crt"
fi
sans="subjectAltName=DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
sans+=",DNS:kubernetes.default.svc.cluster.local,DNS:localhost,DNS:$NODE_NAME"
sans+=",IP:127.0.0.1,IP:$NODE_IP,IP:$SERVICE_IP"
if [[ $(cat "$PKI/apiserver.sans" 2>/dev/null) != "$sans" ]] || ! [[ -f $PKI/apiserver.crt ]] ||
   ! openssl x509 -checkend 86400 -noout -in "$PKI/apiserver.crt" >/dev/null; then
  log "certificates: apiserver serving certificate for $NODE_IP"
  sign apiserver "/CN=kube-apiserver" \
    "$sans"$'\n'"keyUsage=critical,digitalSignature,keyEncipherment"$'\n'"extendedKeyUsage=serverAuth"
  echo "$sans" > "$PKI/apiserver.sans"
fi
if ! [[ -f $PKI/admin.crt ]] || ! openssl x509 -checkend 86400 -noout -in "$PKI/admin.crt" >/dev/null; then
  log "certificates: admin client certificate (system:masters)"
  sign admin "/O=system:masters/CN=cxlab-admin" \
    "keyUsage=critical,digitalSignature,keyEncipherment"$'\n'"extendedKeyUsage=clientAuth"
fi
if ! [[ -f $PKI/front-proxy-client.crt ]] || ! openssl x509 -checkend 86400 -noout -in "$PKI/front-proxy-client.crt" >/dev/null; then
  # the apiserver's client certificate towards aggregated APIs (metrics-server), which trust
  # the user it names in its headers (--requestheader-*)
  log "certificates: front proxy client certificate"
  sign front-proxy-client "/CN=front-proxy-client" \
    "keyUsage=critical,digitalSignature,keyEncipherment"$'\n'"extendedKeyUsage=clientAuth"
fi
if ! [[ -f $PKI/sa.key ]]; then
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
fi
chmod 600 "$PKI"/*.key

b64() { base64 -w0 < "$1"; }
cat > "$KUBECONFIG_FILE.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: cxlab
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(b64 "$PKI/ca.crt")
users:
- name: cxlab-admin
  user:
    client-certificate-data: $(b64 "$PKI/admin.crt")
    client-key-data: $(b64 "$PKI/admin.key")
contexts:
- name: cxlab
  context: {cluster: cxlab, user: cxlab-admin, namespace: default}
current-context: cxlab
EOF
chmod 600 "$KUBECONFIG_FILE.tmp" && mv "$KUBECONFIG_FILE.tmp" "$KUBECONFIG_FILE"
KC=$KUBECONFIG_FILE

# ---- configuration files ----
cat > "$CLUSTER/containerd/config.toml" <<EOF
# containerd of the cxlab local cluster (hack/cluster-up.sh); nothing outside build/cluster
version = 2
root = "$CLUSTER/containerd/root"
state = "$CLUSTER/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$CONTAINERD_SOCK"

[plugins."io.containerd.internal.v1.opt"]
  path = "$CLUSTER/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # root here lacks CAP_SYS_RESOURCE: without this every Pod sticks in ContainerCreating
  # (runc: "failed to update /proc/self/oom_score_adj: Permission denied")
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_cdi = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$CLUSTER/containerd/state/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$CLUSTER/cni/net.d"
    max_conf_num = 1
EOF

cat > "$CLUSTER/cni/net.d/10-cxlab.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "cxlab",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$CLUSTER/cni/ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF

cat > "$CLUSTER/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
cgroupDriver: cgroupfs
failSwapOn: false
# a Guaranteed Pod with whole CPUs gets cores of its own; core 0 stays for the system
cpuManagerPolicy: static
reservedSystemCPUs: "0"
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
address: $NODE_IP
healthzBindAddress: 127.0.0.1
clusterDomain: cluster.local
clusterDNS: [$DNS_SERVICE_IP]
resolvConf: /etc/resolv.conf
podLogsDir: $CLUSTER/kubelet/pod-logs
volumePluginDir: $CLUSTER/kubelet/volume-plugins
serializeImagePulls: false
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
nodeStatusReportFrequency: 10s
syncFrequency: 10s
EOF

cat > "$CLUSTER/kube-proxy/config.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $KC}
hostnameOverride: $NODE_NAME
clusterCIDR: $CLUSTER_CIDR
bindAddress: $NODE_IP
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack: {maxPerCore: 0}
nodePortAddresses: [primary]
EOF

# CoreDNS with kubeadm's Corefile, on the host as the other components: on the node's IP (the
# kube-dns Service's endpoint, below), reading the cluster through the admin kubeconfig; its
# health, readiness and metrics on 127.0.0.1. Names outside cluster.local go to the host's
# resolvers.
mkdir -p "$CLUSTER/coredns"
cat > "$CLUSTER/coredns/Corefile" <<EOF
.:$DNS_PORT {
    bind $NODE_IP
    errors
    health 127.0.0.1:$DNS_HEALTH_PORT {
        lameduck 5s
    }
    ready 127.0.0.1:$DNS_READY_PORT
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $KC cxlab
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    prometheus 127.0.0.1:$DNS_METRICS_PORT
    forward . /etc/resolv.conf {
        max_concurrent 1000
    }
    cache 30
    loop
    reload
    loadbalance
}
EOF
# kube-dns as kubeadm makes it (kube-system, the 10th address of the Service range), its one
# endpoint the node's IP at CoreDNS's port: kube-proxy takes Pods' queries there.
cat > "$CLUSTER/coredns/kube-dns.yaml" <<EOF
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns, kubernetes.io/name: CoreDNS}
spec:
  clusterIP: $DNS_SERVICE_IP
  ports:
  - {name: dns, port: 53, protocol: UDP, targetPort: $DNS_PORT}
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: $DNS_PORT}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kube-dns-node
  namespace: kube-system
  labels: {kubernetes.io/service-name: kube-dns, endpointslice.kubernetes.io/managed-by: cxlab.dev}
addressType: IPv4
endpoints:
- addresses: [$NODE_IP]
  conditions: {ready: true}
ports:
- {name: dns, port: $DNS_PORT, protocol: UDP}
- {name: dns-tcp, port: $DNS_PORT, protocol: TCP}
EOF

# metrics-server as its own manifests register it (the APIService v1beta1.metrics.k8s.io
# behind a kube-system Service), its one endpoint the node's IP: it runs on the host as the
# other components. Its serving certificate is its own, self-signed: the APIService skips
# verifying it, as the upstream manifests' test setups do.
cat > "$CLUSTER/metrics-server.yaml" <<EOF
apiVersion: v1
kind: Service
metadata:
  name: metrics-server
  namespace: kube-system
  labels: {k8s-app: metrics-server}
spec:
  ports:
  - {name: https, port: 443, protocol: TCP, targetPort: $METRICS_SERVER_PORT}
---
# Endpoints, not an EndpointSlice: the aggregator resolves an APIService's Service through
# them (--enable-aggregator-routing); the controller manager mirrors them into a slice
apiVersion: v1
kind: Endpoints
metadata:
  name: metrics-server
  namespace: kube-system
  labels: {k8s-app: metrics-server}
subsets:
- addresses: [{ip: $NODE_IP}]
  ports: [{name: https, port: $METRICS_SERVER_PORT, protocol: TCP}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta1.metrics.k8s.io
  labels: {k8s-app: metrics-server}
spec:
  service: {name: metrics-server, namespace: kube-system, port: 443}
  group: metrics.k8s.io
  version: v1beta1
  insecureSkipTLSVerify: true
  groupPriorityMinimum: 100
  versionPriority: 100
EOF

# ---- kernel settings: routing between the bridge and the host, Services through iptables ----
sysctl -qw net.ipv4.ip_forward=1
[[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] || modprobe br_netfilter 2>/dev/null || true
sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null ||
  log "warning: net.bridge.bridge-nf-call-iptables unavailable; Pod→Service→Pod on the bridge may fail"

# ---- processes ----
# From here on, a failure stops everything this run started (by recorded PID, through
# cluster-down.sh) and names the component, with the end of its log.
failed="" reason=""
fail() { failed=$1 reason=$2; exit 1; }
on_exit() {
  local rc=$?
  ((rc)) || return 0
  trap - ERR
  log "bring-up failed: stopping what it started"
  "$ROOT/hack/cluster-down.sh" >&2 2>&1 || true
  if [[ -n $failed ]]; then
    log "error: $failed $reason"
    log_tail "$LOGS/$failed.log" >&2
  else
    log "error: cluster-up failed at line $err_line: $err_command"
  fi
  exit "$rc"
}
err_line="" err_command=""
trap 'err_line=$LINENO err_command=$BASH_COMMAND' ERR
trap on_exit EXIT

launch() { # name executable args...: started once it runs the executable
  local name=$1; shift
  # hack/stress-bring-up.sh proves the failure path: an unknown flag makes this one exit at once
  [[ ${CXLAB_BRINGUP_FAULT:-} == "$name" ]] && set -- "$@" --cxlab-injected-fault
  start_detached "$PIDS/$name.pid" "$LOGS/$name.log" "$@" || fail "$name" "exited as it started (log: ${LOGS#"$ROOT"/}/$name.log)"
}
wait_for() { # seconds component description command...: the component is blamed on a timeout
  local limit=$1 component=$2 what=$3 deadline=$((SECONDS + $1)); shift 3
  until "$@"; do
    ((SECONDS < deadline)) || fail "$component" "not ready: $what still failing after $limit s (log: ${LOGS#"$ROOT"/}/$component.log)"
    sleep 0.25
  done
}
alive() { component_pid "$1" >/dev/null || fail "$1" "exited (log: ${LOGS#"$ROOT"/}/$1.log)"; }

log "starting etcd and containerd"
launch etcd "$K8S_BIN/etcd" --name cxlab --data-dir "$CLUSTER/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "cxlab=http://127.0.0.1:$ETCD_PEER_PORT" --logger zap --log-level warn
launch containerd containerd --config "$CLUSTER/containerd/config.toml"

etcd_ok() { alive etcd; [[ $(curl -sf --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" | jq -r .health 2>/dev/null) == true ]]; }
wait_for 60 etcd "etcd /health" etcd_ok

log "starting kube-apiserver"
launch kube-apiserver "$K8S_BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --advertise-address "$NODE_IP" --secure-port "$API_PORT" \
  --service-cluster-ip-range "$SERVICE_CIDR" \
  --client-ca-file "$PKI/ca.crt" \
  --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --kubelet-client-certificate "$PKI/admin.crt" --kubelet-client-key "$PKI/admin.key" \
  --kubelet-preferred-address-types InternalIP,Hostname \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --authorization-mode Node,RBAC --allow-privileged=true --profiling=false \
  --requestheader-client-ca-file "$PKI/ca.crt" --requestheader-allowed-names front-proxy-client \
  --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
  --requestheader-extra-headers-prefix X-Remote-Extra- \
  --proxy-client-cert-file "$PKI/front-proxy-client.crt" --proxy-client-key-file "$PKI/front-proxy-client.key" \
  --enable-aggregator-routing=true

containerd_ok() { alive containerd; ctr --address "$CONTAINERD_SOCK" version >/dev/null 2>&1; }
wait_for 60 containerd "containerd's socket" containerd_ok
"$ROOT/hack/images.sh" --import || fail containerd "did not take the images (hack/images.sh --import)"

apiserver_ok() { alive kube-apiserver; [[ $(api /readyz 2>/dev/null) == ok ]]; }
wait_for 180 kube-apiserver "kube-apiserver /readyz" apiserver_ok
"$K8S_BIN/kubectl" --kubeconfig "$KC" apply --server-side --force-conflicts \
  -f "$CLUSTER/coredns/kube-dns.yaml" >/dev/null || fail kube-apiserver "refused the kube-dns Service"
"$K8S_BIN/kubectl" --kubeconfig "$KC" apply --server-side --force-conflicts \
  -f "$CLUSTER/metrics-server.yaml" >/dev/null || fail kube-apiserver "refused metrics-server's APIService"

log "starting kube-controller-manager, kube-scheduler, kubelet, kube-proxy, CoreDNS"
launch kube-controller-manager "$K8S_BIN/kube-controller-manager" \
  --kubeconfig "$KC" --authentication-kubeconfig "$KC" --authorization-kubeconfig "$KC" \
  --bind-address 127.0.0.1 --leader-elect=false \
  --root-ca-file "$PKI/ca.crt" --service-account-private-key-file "$PKI/sa.key" \
  --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
  --use-service-account-credentials=false --allocate-node-cidrs=false --profiling=false \
  --horizontal-pod-autoscaler-sync-period 5s
launch kube-scheduler "$K8S_BIN/kube-scheduler" \
  --kubeconfig "$KC" --authentication-kubeconfig "$KC" --authorization-kubeconfig "$KC" \
  --bind-address 127.0.0.1 --leader-elect=false --profiling=false
launch kubelet "$K8S_BIN/kubelet" \
  --config "$CLUSTER/kubelet/config.yaml" --kubeconfig "$KC" \
  --root-dir "$CLUSTER/kubelet/root" --cert-dir "$CLUSTER/kubelet/pki" \
  --node-ip "$NODE_IP" --hostname-override "$NODE_NAME"
launch kube-proxy "$K8S_BIN/kube-proxy" --config "$CLUSTER/kube-proxy/config.yaml"
launch coredns "$K8S_BIN/coredns" -conf "$CLUSTER/coredns/Corefile"
# the kubelet's CPU every 10 s (its least): an HPA sees a change of load within about 20 s
mkdir -p "$CLUSTER/metrics-server"
launch metrics-server "$BUILD/bin/metrics-server" \
  --kubeconfig "$KC" --authentication-kubeconfig "$KC" --authorization-kubeconfig "$KC" \
  --bind-address "$NODE_IP" --secure-port "$METRICS_SERVER_PORT" --cert-dir "$CLUSTER/metrics-server" \
  --kubelet-insecure-tls --kubelet-preferred-address-types InternalIP --metric-resolution 10s \
  --kubelet-request-timeout 5s \
  --profiling=false

all_ok() { local c; for c in "${COMPONENTS[@]}"; do alive "$c"; done; }
ready() { all_ok; node_ready; }
wait_for 180 kubelet "node $NODE_NAME to be Ready" ready
default_sa() { all_ok; api /api/v1/namespaces/default/serviceaccounts/default >/dev/null; }
wait_for 120 kube-controller-manager "the default ServiceAccount" default_sa
dns_ok() { all_ok; curl -sf --max-time 2 "http://127.0.0.1:$DNS_READY_PORT/ready" >/dev/null; }
wait_for 120 coredns "CoreDNS /ready (it has read the cluster's Services)" dns_ok
# Available once metrics-server has read the kubelet twice (a CPU rate needs two readings)
metrics_ok() {
  all_ok
  [[ $("$K8S_BIN/kubectl" --kubeconfig "$KC" get apiservice v1beta1.metrics.k8s.io \
    -o 'jsonpath={.status.conditions[?(@.type=="Available")].status}' 2>/dev/null) == True ]]
}
wait_for 120 metrics-server "the APIService v1beta1.metrics.k8s.io Available" metrics_ok
trap - EXIT ERR

log "cluster up in $((SECONDS - start)) s: node $NODE_NAME ($NODE_IP) Ready"
log "  export KUBECONFIG=$KUBECONFIG_FILE"
