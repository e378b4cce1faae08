#!/usr/bin/env bash
# A service wrapper for tests: `cgroup_join.sh PORT COMMAND...` runs COMMAND in the cgroup v1
# `memory` group named by $CXLAB_TEST_CGROUP (made by helpers/cgroups.py; a page is charged
# where it is first touched and this kernel moves no charges, so COMMAND joins before its
# first page) and, once PORT answers HTTP, moves it and its descendants into the `cpuacct`
# group of that name, and takes the counter's base once it grew by at most 10 ms in 0.2 s
# (its other workers' start-up over, as cxlab run waits for it): the kernel's own CPU counter
# then holds the service's CPU from its readiness on, its start-up left out. On SIGTERM (cxlab run stopping the variant; it reaches
# COMMAND too, from their process group) both counters go at once to
# $CXLAB_TEST_CGROUP_OUT/<group>.json, before COMMAND's own shutdown adds to them.
# Pure bash apart from pgrep: no interpreter of its own in the memory group.
set -u
port=$1
shift
group=/sys/fs/cgroup
name=$CXLAB_TEST_CGROUP
echo $$ >"$group/memory/$name/cgroup.procs"
base=0
# The peak counts the page cache charged to the group too: the files COMMAND read at its
# start, charged here when no one read them before (a cold machine). Those pages stay
# inactive, and a working set (the kubelet's, cxlab's) leaves them out: so does the reading.
snapshot() {
  local peak key value inactive=0
  peak=$(cat "$group/memory/$name/memory.max_usage_in_bytes")
  while read -r key value; do
    [[ $key == total_inactive_file ]] && inactive=$value
  done <"$group/memory/$name/memory.stat"
  echo "{\"cpuNanoseconds\": $(($(cat "$group/cpuacct/$name/cpuacct.usage") - base)), \"peakBytes\": $peak, \"inactiveFileBytes\": $inactive}" \
    >"$CXLAB_TEST_CGROUP_OUT/$name.json"
  exit 143
}
trap snapshot TERM
"$@" &
service=$!
answers() {
  exec 3<>"/dev/tcp/127.0.0.1/$port" 2>/dev/null || return 1
  printf 'GET /get HTTP/1.0\r\n\r\n' >&3
  local line=""
  read -r -t 2 line <&3
  exec 3<&-
  [[ $line == HTTP/* ]]
}
until answers; do
  kill -0 $service 2>/dev/null || { wait $service; exit $?; }
  sleep 0.02
done
pids=$service
while [ -n "$pids" ]; do
  for pid in $pids; do echo "$pid" >"$group/cpuacct/$name/cgroup.procs"; done
  pids=$(pgrep -d ' ' -P "$(echo $pids | tr ' ' ,)")
done
usage() { cat "$group/cpuacct/$name/cpuacct.usage"; }
before=$(usage)
while sleep 0.2; do
  now=$(usage)
  ((now - before <= 10000000)) && break
  before=$now
done
base=$now
wait $service
