#!/usr/bin/env bash
# Stops the cluster tests/cluster/up.sh started in DIR: every component by the
# PID up.sh recorded (SIGTERM in parallel, SIGKILL after a grace period; the
# API server before etcd, which it would hang on), then whatever is left in the
# cluster's cgroup tree (containerd's shims and the containers), then the
# holder of the namespaces, whose exit removes every mount, interface and
# iptables rule with them; last the cgroup tree. The registry and the Git
# server of flux-up.sh go first. Safe to run twice, and on a
# cluster that only half started. Keeps DIR (logs); delete it yourself.
set -uo pipefail

[ $# -eq 1 ] || { echo "usage: tests/cluster/down.sh DIR" >&2; exit 2; }
[ -d "$1" ] || exit 0
dir=$(cd "$1" && pwd)
grace=${GPUREADY_CLUSTER_STOP_GRACE_SECS:-10}

alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }
pid_of() { [ -f "$dir/pids/$1" ] && cat "$dir/pids/$1"; }

# stop NAME...: SIGTERM to each, wait for all up to the grace period, then SIGKILL.
stop() {
  local pids=() p
  for n in "$@"; do
    p=$(pid_of "$n") || continue
    # The PID is ours only if it still runs what up.sh started there.
    alive "$p" && pids+=("$p") && kill -TERM "$p" 2>/dev/null
  done
  local deadline=$((SECONDS + grace))
  for p in "${pids[@]}"; do
    while alive "$p" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
    alive "$p" && kill -KILL "$p" 2>/dev/null
  done
  for n in "$@"; do rm -f "$dir/pids/$n"; done
}

# flux-up.sh's registry, Git server and their host bridges, when it ran.
stop registry git-server socat-registry-host socat-registry-inside socat-git-host socat-git-inside
stop kubelet kube-proxy kube-scheduler kube-controller-manager socat-host socat-inside
stop kube-apiserver
stop etcd
stop containerd

# What is left in the cgroup tree: containerd's shims (they outlive
# containerd) and the containers' processes. SIGKILL until it is empty.
cgroup_name=$(cat "$dir/cgroup" 2>/dev/null || true)
if [ -n "$cgroup_name" ]; then
  for _ in $(seq 1 50); do
    left=$(find /sys/fs/cgroup/*/"$cgroup_name" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
    # Never this script itself (it is outside the tree unless it was up.sh's caller).
    left=$(echo "$left" | grep -vx "$$" || true)
    [ -z "$left" ] && break
    # shellcheck disable=SC2086
    kill -KILL $left 2>/dev/null
    sleep 0.1
  done
fi

stop holder

# The cgroup tree, deepest first (the kubelet's kubepods/... below pods).
if [ -n "$cgroup_name" ]; then
  for h in /sys/fs/cgroup/*/; do
    [ -d "$h$cgroup_name" ] || continue
    find "$h$cgroup_name" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [ -d "$h$cgroup_name" ] && echo "warning: could not remove $h$cgroup_name" >&2
  done
  rm -f "$dir/cgroup"
fi
# Leftovers of the overlays' work dirs are owned by root with mode 000.
chmod -R u+rwx "$dir/overlay" 2>/dev/null || true
exit 0
