#!/usr/bin/env bash
# Takes down the cluster hack/cluster-up.sh started, and only that: the processes whose PIDs
# it recorded under build/cluster/pids/, then what they left behind and a next bring-up would
# trip over: containers and their shims and processes, mounts under build/cluster, the
# Pods' network namespaces, and the cluster's state (etcd data, kubelet and containerd state,
# IP allocations). The machine-wide state (the kubepods cgroups, the cni0 bridge and its
# veths, the iptables chains of kube-proxy, kubelet and the CNI plugins) is cleaned only when
# this checkout's cluster owns it (/run/cxlab/cluster.owner, written by cluster-up): a cluster
# from another checkout keeps its network. Kept: certificates, kubeconfig, containerd's image
# store, logs. Idempotent: safe to run twice, or when nothing runs.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

[[ $(id -u) == 0 ]] || die "cluster-down needs root"
cluster_lock
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
start=$SECONDS

stop_component() { # name seconds
  local pid
  if pid=$(component_pid "$1"); then
    log "stopping $1 ($pid)"
    stop_pid "$pid" "$1" "$2"
  fi
  rm -f "$PIDS/$1.pid"
}

did=0   # whether there was anything to stop or clean
act() { did=1; log "$@"; }
compgen -G "$PIDS/*.pid" >/dev/null && did=1

# 1. kubelet first, so that it restarts nothing while the rest goes; then the control plane,
#    and etcd once the apiserver is gone (it still writes while it shuts down), while (2.) the
#    containers are killed and removed through containerd.
# Kueue (hack/kueue.sh), if it was started: its webhooks go with the apiserver's data.
stop_component kueue 20
# KWOK (hack/kwok.sh), if it was started: its fake nodes go with the apiserver's data.
stop_component kwok 20
ip route del unreachable 10.128.0.0/16 2>/dev/null || true  # hack/kwok.sh's fake Pod IPs
stop_component kubelet 10
(
  for c in metrics-server coredns kube-proxy kube-scheduler kube-controller-manager kube-apiserver; do
    stop_component "$c" 15 &
  done
  wait
  stop_component etcd 10
) &

# 2. Containers: killed and removed through containerd while it still runs.
if component_pid containerd >/dev/null && [[ -S $CONTAINERD_SOCK ]]; then
  ctrc() { ctr --address "$CONTAINERD_SOCK" --timeout 10s -n k8s.io "$@"; }
  tasks=$(ctrc tasks ls -q 2>/dev/null)
  if [[ -n $tasks ]]; then
    log "removing $(wc -w <<<"$tasks") containers"
    for id in $tasks; do ctrc tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1; done
    for id in $tasks; do ctrc tasks delete -f "$id" >/dev/null 2>&1; done
  fi
  for id in $(ctrc containers ls -q 2>/dev/null); do ctrc containers delete "$id" >/dev/null 2>&1; done
fi
stop_component containerd 15
wait

# 3. Shims of this containerd (their command line names its socket) and any process left in
#    the Pods' cgroups (kubepods, made by this cluster's kubelet).
for pid in $(pgrep -f -- "containerd-shim.* -address $CONTAINERD_SOCK( |\$)"); do
  act "stopping leftover shim $pid"
  stop_pid "$pid" containerd-shim 5
done
kubepods_pids() {
  local d
  for d in /sys/fs/cgroup/*/kubepods; do
    [[ -d $d ]] && find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null
  done | sort -un
}
# The kubepods cgroups, the bridge, the iptables chains and the CNI caches are the machine's:
# only the checkout that claimed them cleans them.
if owns_machine; then mine=1; else mine=0; fi
for _ in 1 2 3; do
  ((mine)) || break
  mapfile -t pids < <(kubepods_pids)
  ((${#pids[@]})) || break
  act "killing processes left in kubepods cgroups: ${pids[*]}"
  kill -KILL "${pids[@]}" 2>/dev/null
  sleep 0.3
done
for d in /sys/fs/cgroup/*/kubepods; do
  ((mine)) && [[ -d $d ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
done

# 4. Mounts under build/cluster (container root filesystems, /dev/shm of sandboxes, network
#    namespaces, Pod volumes), deepest first.
for _ in 1 2; do
  mounts=$(findmnt -rn -o TARGET | grep "^$CLUSTER/" | awk '{print length, $0}' | sort -rn | cut -d' ' -f2-)
  [[ -z $mounts ]] && break
  act "unmounting $(wc -l <<<"$mounts") mounts under ${CLUSTER#"$ROOT"/}"
  while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done <<<"$mounts"
done

# 5. The bridge and its veths.
if ((mine)) && ip link show "$CNI_BRIDGE" >/dev/null 2>&1; then
  for veth in $(ip -o link show master "$CNI_BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    ip link del "$veth" 2>/dev/null
  done
  act "deleting bridge $CNI_BRIDGE"
  ip link del "$CNI_BRIDGE" 2>/dev/null
fi

# 6. iptables: kube-proxy's own clean-up, then every chain named KUBE-* or CNI-* (kubelet,
#    kube-proxy and the bridge/portmap plugins) and the rules that jump to them.
if ((mine)) && [[ -x $K8S_BIN/kube-proxy ]] && command -v iptables >/dev/null; then
  mkdir -p "$LOGS"
  "$K8S_BIN/kube-proxy" --cleanup >> "$LOGS/kube-proxy-cleanup.log" 2>&1
fi
for family in iptables ip6tables; do
  ((mine)) || break
  command -v "$family-save" >/dev/null || continue
  for table in filter nat mangle; do
    saved=$("$family-save" -t "$table" 2>/dev/null) || continue
    grep -qE 'KUBE-|CNI-' <<<"$saved" || continue
    act "removing KUBE-*/CNI-* chains from $family $table"
    grep -vE 'KUBE-|CNI-' <<<"$saved" | "$family-restore" -w 5 ||
      log "warning: could not restore $family table $table"
  done
done

# 7. State a next bring-up must not find (certificates, kubeconfig, images and logs stay),
#    and what kubelet and the CNI library keep outside build/cluster by design: the
#    /var/log/containers links into our Pod logs, cached CNI results of our network (and the
#    loopback results of the same sandboxes), kubelet's device-plugin socket.
find /var/log/containers -maxdepth 1 -type l -lname "$CLUSTER/*" -delete 2>/dev/null
if ((mine)) && [[ -d /var/lib/cni/results ]]; then
  for f in /var/lib/cni/results/cxlab-*; do
    [[ -e $f ]] || continue
    id=${f#/var/lib/cni/results/cxlab-}; id=${id%-*}
    rm -f "$f" "/var/lib/cni/results/cni-loopback-$id-lo"
  done
fi
if ((mine)); then
  rm -f /var/lib/kubelet/device-plugins/kubelet.sock
  rmdir /var/lib/kubelet/device-plugins /var/lib/kubelet /run/containerd/s /run/containerd 2>/dev/null
fi
if [[ -d $CLUSTER ]]; then
  rm -rf "$CLUSTER/etcd" "$CLUSTER/kubelet" "$CLUSTER/containerd/state" "$CLUSTER/containerd/opt" \
    "$CLUSTER/containerd/root/io.containerd.grpc.v1.cri" "$CLUSTER/cni/ipam" "$CLUSTER/kube-proxy" "$PIDS" "$CONTAINERD_SOCK" "$CONTAINERD_SOCK.ttrpc"
fi

((mine)) || [[ -z $(machine_owner) ]] ||
  log "left the machine's network state (cni0, KUBE-*/CNI-* chains) to $(machine_owner), which claimed it"
# Anything of ours still running? (should never happen)
left=$(pgrep -d, -f -- "$CLUSTER/|$K8S_BIN/")
[[ -z $left ]] || log "warning: still running: $(ps -o pid=,args= -p "$left")"
if ((did)); then
  log "cluster down ($((SECONDS - start)) s)"
else
  log "cluster down (nothing ran)"
fi
