#!/usr/bin/env bash
# Starts the project's real single-node Kubernetes cluster in DIR: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, containerd, kubelet
# and kube-proxy, with Pods on a bridge network. Everything runs inside one
# network and mount namespace held by a "holder" process, so the host's network
# (interfaces, routes, iptables, ip_forward) is never changed, and the paths
# containerd, the kubelet and the CNI plugins hard-code (/run, /var, /opt,
# /usr) are overlay mounts whose upper layers live in DIR: nothing is written
# outside DIR. The one exception is the cgroup tree /gpuready-<id> in each
# cgroup v1 hierarchy (the kubelet needs a cgroup root); down.sh removes it.
# The API server is reached from the host through a socat pair on a free
# 127.0.0.1 port. The last line printed is KUBECONFIG=<file>.
#
# Needs root, cgroup v1 or v2 mounted under /sys/fs/cgroup, and what
# tests/control-plane/build.sh and tests/cluster/build.sh build (run them first).
# Stop it with tests/cluster/down.sh DIR. Logs: DIR/logs/*.log.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 1 ] || { echo "usage: tests/cluster/up.sh DIR   (then: export the KUBECONFIG=... of the last line)" >&2; exit 2; }
mkdir -p "$1"
dir=$(cd "$1" && pwd)
start=$SECONDS
step() { printf '==> [%3ss] %s\n' "$((SECONDS - start))" "$*" >&2; }
die() { echo "error: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "up.sh needs root (namespaces, mounts, cgroups)"
case "$dir/" in
  /run/*|/var/*|/opt/*|/usr/*) die "DIR must not be under /run, /var, /opt or /usr: those are overlaid inside the cluster" ;;
esac
[ ! -e "$dir/pids/holder" ] || die "$dir already holds a cluster; run tests/cluster/down.sh $dir first"

assets=$(bash "$here/../control-plane/build.sh" --print-dir)
bin=$(bash "$here/build.sh" --print-dir)
for f in "$assets/etcd" "$assets/kube-apiserver" "$assets/kubectl" "$bin/kubelet" "$bin/kube-controller-manager" \
         "$bin/kube-scheduler" "$bin/kube-proxy" "$bin/pause.tar"; do
  [ -e "$f" ] || die "$f is missing: run tests/control-plane/build.sh and tests/cluster/build.sh"
done
for c in containerd runc socat iptables nsenter unshare openssl ip; do
  command -v "$c" >/dev/null || die "$c is not installed: run tests/cluster/build.sh"
done
kubectl=$assets/kubectl
k8s_version=$("$assets/kube-apiserver" --version | awk '{print $2}')
pause_image=$(cat "$bin/pause.name")

# Fixed addresses: they exist only inside the cluster's network namespace, so
# two clusters (or a cluster and the envtest API servers of the tests) never clash.
node_ip=10.200.0.2
node_gw=10.200.0.1
pod_cidr=10.244.0.0/24
service_cidr=10.96.0.0/24
service_ip=10.96.0.1
node_name=${GPUREADY_CLUSTER_NODE_NAME:-gpuready-node}
id=$(basename "$dir" | tr -c 'a-zA-Z0-9_-' '_' | cut -c1-40)-$$
cgroup_name="gpuready-$id"

mkdir -p "$dir"/{pids,logs,pki,etcd,containerd,kubelet/pki,kubelet/volume-plugins,cni/net.d,cni/ipam,tmp,overlay,config/certs.d}
echo "$cgroup_name" > "$dir/cgroup"

# ---------------------------------------------------------------- cgroups
# One tree per cgroup v1 hierarchy: `system` holds this script and so every
# component started below (and containerd's shims), `pods` is the kubelet's
# cgroupRoot. down.sh kills whatever is left in the tree and removes it.
step "cgroups /$cgroup_name"
for h in /sys/fs/cgroup/*/; do
  h=${h%/}
  [ -f "$h/cgroup.procs" ] || continue
  case "$(basename "$h")" in unified) continue ;; esac
  for sub in "" /system /pods; do
    mkdir -p "$h/$cgroup_name$sub"
    # A cpuset cgroup takes no task before it has CPUs and memory nodes.
    if [ -f "$h/cpuset.cpus" ]; then
      parent=$h; [ -z "$sub" ] || parent=$h/$cgroup_name
      cat "$parent/cpuset.cpus" > "$h/$cgroup_name$sub/cpuset.cpus"
      cat "$parent/cpuset.mems" > "$h/$cgroup_name$sub/cpuset.mems"
    fi
  done
  echo $$ > "$h/$cgroup_name/system/cgroup.procs"
done

# ---------------------------------------------------------------- certificates
step "certificates"
pki=$dir/pki
openssl ecparam -name prime256v1 -genkey -noout -out "$pki/ca.key" 2>/dev/null
openssl req -x509 -new -key "$pki/ca.key" -subj "/CN=gpuready-e2e-ca" -days 30 -out "$pki/ca.crt" 2>/dev/null
# cert NAME SUBJECT [SAN]
cert() {
  openssl ecparam -name prime256v1 -genkey -noout -out "$pki/$1.key" 2>/dev/null
  openssl req -new -key "$pki/$1.key" -subj "$2" -out "$pki/$1.csr" 2>/dev/null
  local ext="$pki/$1.ext"
  printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n' > "$ext"
  [ -z "${3:-}" ] || echo "subjectAltName=$3" >> "$ext"
  openssl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 30 -extfile "$ext" -out "$pki/$1.crt" 2>/dev/null
  rm -f "$pki/$1.csr" "$ext"
}
cert apiserver "/CN=kube-apiserver" \
  "IP:$node_ip,IP:$service_ip,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
cert admin "/O=system:masters/CN=gpuready-e2e-admin"
cert kubelet "/O=system:nodes/CN=system:node:$node_name"
cert kubelet-serving "/CN=$node_name" "IP:$node_ip,DNS:$node_name"
cert controller-manager "/CN=system:kube-controller-manager"
cert scheduler "/CN=system:kube-scheduler"
cert kube-proxy "/CN=system:kube-proxy"
openssl ecparam -name prime256v1 -genkey -noout -out "$pki/sa.key" 2>/dev/null
openssl ec -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null

# kubeconfig FILE SERVER CERT
kubeconfig() {
  cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: gpuready-e2e
  cluster:
    server: $2
    certificate-authority: $pki/ca.crt
users:
- name: $3
  user:
    client-certificate: $pki/$3.crt
    client-key: $pki/$3.key
contexts:
- name: gpuready-e2e
  context: {cluster: gpuready-e2e, user: $3}
current-context: gpuready-e2e
EOF
}
inside="https://$node_ip:6443"
for c in kubelet controller-manager scheduler kube-proxy admin; do
  kubeconfig "$dir/config/$c.kubeconfig" "$inside" "$c"
done

# ---------------------------------------------------------------- the holder
step "namespaces and overlays"
# Without --fork unshare execs sleep, so $! is the process that holds the
# namespaces: killing it last (down.sh) removes every mount and interface.
unshare --net --mount --propagation slave sleep infinity </dev/null >/dev/null 2>&1 &
holder=$!
echo "$holder" > "$dir/pids/holder"
for _ in $(seq 1 50); do
  [ "$(readlink /proc/$holder/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break
  sleep 0.05
done
[ "$(readlink /proc/$holder/ns/net)" != "$(readlink /proc/self/ns/net)" ] || die "the holder did not enter its namespaces"
in_ns() { nsenter -t "$holder" -n -m -- "$@"; }
for p in run var opt usr; do
  mkdir -p "$dir/overlay/$p/upper" "$dir/overlay/$p/work"
  in_ns mount -n -t overlay overlay \
    -o "lowerdir=/$p,upperdir=$dir/overlay/$p/upper,workdir=$dir/overlay/$p/work" "/$p"
done
in_ns sh -euc "
  ip link set lo up
  ip link add gr-node type veth peer name gr-peer
  ip addr add $node_ip/24 dev gr-node
  ip link set gr-node up
  ip link set gr-peer up
  ip route add default via $node_gw dev gr-node
  sysctl -qw net.ipv4.ip_forward=1
"

# start, wait_for (tests/cluster/ns-lib.sh).
# shellcheck source=tests/cluster/ns-lib.sh
. "$here/ns-lib.sh"
timeout_s=${GPUREADY_CLUSTER_TIMEOUT_SECS:-120}

# ---------------------------------------------------------------- control plane
step "etcd and kube-apiserver $k8s_version"
start etcd "$assets/etcd" --data-dir "$dir/etcd" --listen-client-urls http://127.0.0.1:2379 \
  --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 \
  --initial-advertise-peer-urls http://127.0.0.1:2380 --initial-cluster default=http://127.0.0.1:2380 \
  --unsafe-no-fsync --log-level warn
start kube-apiserver "$assets/kube-apiserver" \
  --etcd-servers http://127.0.0.1:2379 \
  --advertise-address "$node_ip" --bind-address 0.0.0.0 --secure-port 6443 \
  --service-cluster-ip-range "$service_cidr" \
  --client-ca-file "$pki/ca.crt" --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
  --kubelet-preferred-address-types InternalIP,Hostname \
  --allow-privileged=true --cert-dir "$dir/pki/apiserver-generated" --v 1

# The host's way in: 127.0.0.1:PORT -> a unix socket in DIR -> the node IP.
start socat-inside socat "UNIX-LISTEN:$dir/api.sock,fork,mode=600" "TCP:$node_ip:6443"
port=""
for _ in $(seq 1 20); do
  # A free port can be taken between choosing it and socat binding it: retry.
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  socat "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork" "UNIX-CONNECT:$dir/api.sock" >"$dir/logs/socat-host.log" 2>&1 &
  echo $! > "$dir/pids/socat-host"
  sleep 0.2
  kill -0 "$(cat "$dir/pids/socat-host")" 2>/dev/null && break
  port=""
done
[ -n "$port" ] || die "socat found no free port on 127.0.0.1"
echo "$port" > "$dir/port"
kubeconfig "$dir/kubeconfig" "https://127.0.0.1:$port" admin
export KUBECONFIG="$dir/kubeconfig" KUBECACHEDIR="$dir/kube-cache"
wait_for "kube-apiserver" "$timeout_s" "$kubectl" get --raw /readyz

step "kube-controller-manager and kube-scheduler"
start kube-controller-manager "$bin/kube-controller-manager" \
  --kubeconfig "$dir/config/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$dir/config/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$dir/config/controller-manager.kubeconfig" \
  --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
  --use-service-account-credentials=true --leader-elect=false \
  --cluster-cidr 10.244.0.0/16 --allocate-node-cidrs=false \
  --service-cluster-ip-range "$service_cidr" \
  --flex-volume-plugin-dir "$dir/kubelet/volume-plugins" \
  --cert-dir "$dir/pki/kcm-generated" --bind-address 127.0.0.1
start kube-scheduler "$bin/kube-scheduler" \
  --kubeconfig "$dir/config/scheduler.kubeconfig" \
  --authentication-kubeconfig "$dir/config/scheduler.kubeconfig" \
  --authorization-kubeconfig "$dir/config/scheduler.kubeconfig" \
  --leader-elect=false --bind-address 127.0.0.1 --cert-dir "$dir/pki/scheduler-generated"

# ---------------------------------------------------------------- the node
step "containerd $(containerd --version | awk '{print $3}')"
cat > "$dir/config/containerd.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
# /opt/containerd is hard-coded by this plugin; nothing here needs it.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$dir/containerd/containerd.sock"
[ttrpc]
  address = "$dir/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  # This VM's bounding set lacks CAP_SYS_RESOURCE: the kubelet's oom_score_adj
  # of -998 for the sandbox would fail runc create.
  restrict_oom_score_adj = true
  enable_unprivileged_ports = false
  # Registry hosts, one folder per registry address: tests/cluster/flux-up.sh
  # puts there the plain-HTTP local registry's (hosts.toml); read at each pull.
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$dir/config/certs.d"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
EOF
cat > "$dir/cni/net.d/10-gpuready.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "gpuready-e2e",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
      "ipam": {"type": "host-local", "dataDir": "$dir/cni/ipam",
               "ranges": [[{"subnet": "$pod_cidr"}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
start containerd containerd --config "$dir/config/containerd.toml"
ctr() { in_ns ctr --address "$dir/containerd/containerd.sock" "$@"; }
wait_for containerd 60 ctr version
# The sandbox image, and the small client image tests use (build.sh made both).
ctr -n k8s.io images import "$bin/pause.tar" >/dev/null
ctr -n k8s.io images import "$bin/busybox.tar" >/dev/null
# Images named in GPUREADY_CLUSTER_IMAGES (tarballs, space-separated) are imported too.
for t in ${GPUREADY_CLUSTER_IMAGES:-}; do ctr -n k8s.io images import "$t" >/dev/null; done

step "kubelet and kube-proxy"
cat > "$dir/config/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 on this machine: the kubelet refuses it since 1.35 unless told.
failCgroupV1: false
# containerd 1.6 cannot report its cgroup driver (no RuntimeConfig CRI call).
cgroupDriver: cgroupfs
cgroupRoot: /$cgroup_name/pods
containerRuntimeEndpoint: unix://$dir/containerd/containerd.sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $pki/kubelet-serving.crt
tlsPrivateKeyFile: $pki/kubelet-serving.key
address: $node_ip
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
failSwapOn: false
volumePluginDir: $dir/kubelet/volume-plugins
podLogsDir: $dir/kubelet/pod-logs
# There is no registry to pull a collected image back from.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
serializeImagePulls: false
rotateCertificates: false
EOF
start kubelet "$bin/kubelet" --config "$dir/config/kubelet.yaml" \
  --kubeconfig "$dir/config/kubelet.kubeconfig" --root-dir "$dir/kubelet" \
  --cert-dir "$dir/kubelet/pki" --hostname-override "$node_name" --node-ip "$node_ip" --v 1
cat > "$dir/config/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $dir/config/kube-proxy.kubeconfig}
mode: iptables
clusterCIDR: 10.244.0.0/16
hostnameOverride: $node_name
bindAddress: $node_ip
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
# Leave the conntrack sysctls as they are (some are not per network namespace).
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
# Every Service connection is masqueraded, so a pod reaching a Service whose
# backend sits on the same bridge gets its answer back through the NAT.
iptables: {masqueradeAll: true, localhostNodePorts: false}
EOF
start kube-proxy "$bin/kube-proxy" --config "$dir/config/kube-proxy.yaml"

node_ready() {
  [ "$("$kubectl" get node "$node_name" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wait_for "node $node_name Ready" "$timeout_s" node_ready
wait_for "the default ServiceAccount" "$timeout_s" "$kubectl" -n default get serviceaccount default
wait_for "kube-root-ca.crt" "$timeout_s" "$kubectl" -n default get configmap kube-root-ca.crt
step "cluster up: node $node_name Ready (logs: $dir/logs)"
echo "KUBECONFIG=$dir/kubeconfig"
