#!/usr/bin/env bash
# The try-out in a real cluster (`tests/tryout.sh --cluster`): starts the
# single-node cluster of tests/cluster in a temporary folder, builds the image
# from this checkout, `helm install`s the chart into a restricted namespace, and
# narrates the operator's pods coming up and acting: a GPU node (a Node object
# without a kubelet, kept alive by a heartbeat here) is tainted while its GPU is
# unhealthy and released once repaired; `helm uninstall` releases the nodes.
# Stops the cluster on exit. Needs root. KEEP=1 leaves it running and prints
# how to reach it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/../.."
[ "$(id -u)" = 0 ] || { echo "error: the cluster try-out needs root (namespaces, mounts, cgroups)" >&2; exit 1; }

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
bash tests/control-plane/build.sh >/dev/null
bash tests/cluster/build.sh >/dev/null
tools=$(bash tests/control-plane/build.sh --print-dir)
export PATH="$tools:$PATH"

dir=$(mktemp -d /tmp/gpuready-tryout-XXXXXX)
beat=""
cleanup() {
  [ -z "$beat" ] || kill "$beat" 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then
    echo "the cluster keeps running: export KUBECONFIG=$dir/kubeconfig; stop it with: bash tests/cluster/down.sh $dir"
  else
    bash tests/cluster/down.sh "$dir"; rm -rf "$dir"
  fi
}
trap cleanup EXIT

say "starting a single-node cluster in $dir (kubelet, containerd, scheduler, controller-manager)"
bash tests/cluster/up.sh "$dir" | tail -n 1
export KUBECONFIG=$dir/kubeconfig KUBECACHEDIR=$dir/kube-cache
export HELM_CACHE_HOME=$dir/helm/cache HELM_CONFIG_HOME=$dir/helm/config HELM_DATA_HOME=$dir/helm/data
kubectl get nodes -o wide

say "building the operator image from this checkout and importing it (no registry)"
ref=$(GPUREADY_IMAGE_PROFILE=${GPUREADY_IMAGE_PROFILE:-dev} bash tests/cluster/image.sh --import "$dir" | tail -n 1)
echo "$ref"

say "helm install into gpuready-system (restricted Pod Security Standard)"
kubectl create namespace gpuready-system
kubectl label namespace gpuready-system pod-security.kubernetes.io/enforce=restricted
helm install gpuready charts/gpuready -n gpuready-system \
  --set image.repository="${ref%:*}" --set image.tag="${ref##*:}" --wait --timeout 5m
kubectl -n gpuready-system get pods -o wide
kubectl -n gpuready-system get lease gpuready

say "a GPU node (no kubelet: a heartbeat keeps it Ready) with an unhealthy GPU"
kubectl apply -f - <<'EOF'
apiVersion: v1
kind: Node
metadata:
  name: gpu-1
  labels:
    pool: tryout
    nvidia.com/gpu.product: NVIDIA-GeForce-RTX-3090
    nvidia.com/gpu.memory: "24576"
    nvidia.com/gpu.count: "1"
    nvidia.com/gpu.compute.major: "8"
    nvidia.com/gpu.compute.minor: "6"
    nvidia.com/gpu.family: ampere
    nvidia.com/cuda.driver-version.full: "580.178.04"
    nvidia.com/cuda.runtime-version.full: "13.0"
    feature.node.kubernetes.io/pci-0300_10de.present: "true"
spec:
  taints: [{key: tryout.gpuready.test/no-kubelet, value: "true", effect: NoSchedule}]
EOF
status() {
  local now; now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  kubectl patch node gpu-1 --subresource=status --type=strategic -p "{\"status\": {
    \"capacity\": {\"cpu\": \"8\", \"memory\": \"32Gi\", \"pods\": \"110\", \"nvidia.com/gpu\": \"1\"},
    \"allocatable\": {\"cpu\": \"8\", \"memory\": \"32Gi\", \"pods\": \"110\", \"nvidia.com/gpu\": \"$1\"},
    \"conditions\": [{\"type\": \"Ready\", \"status\": \"True\", \"reason\": \"KubeletReady\",
      \"message\": \"try-out heartbeat\", \"lastHeartbeatTime\": \"$now\", \"lastTransitionTime\": \"$now\"}]}}" >/dev/null
}
status 0
(while sleep 5; do
   now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
   kubectl patch node gpu-1 --subresource=status --type=strategic -p "{\"status\": {\"conditions\": [{\"type\": \"Ready\", \"status\": \"True\", \"reason\": \"KubeletReady\", \"message\": \"try-out heartbeat\", \"lastHeartbeatTime\": \"$now\"}]}}" >/dev/null 2>&1 || true
 done) &
beat=$!
kubectl label node gpu-1 nvidia.com/gfd.timestamp="$(date +%s)" --overwrite >/dev/null
kubectl apply -f - <<'EOF'
apiVersion: gpuready.io/v1alpha1
kind: GpuNodeProfile
metadata:
  name: rtx3090
spec:
  nodeSelector: {matchLabels: {pool: tryout}}
  gpu: {products: [NVIDIA-GeForce-RTX-3090], minMemoryMib: 24000}
  minDriverVersion: "570.0"
EOF
wait_taint() {
  for _ in $(seq 1 120); do
    has=$(kubectl get node gpu-1 -o jsonpath='{.spec.taints[?(@.key=="readiness.k8s.io/gpuready-not-ready")].key}')
    if [ "$1" = yes ] && [ -n "$has" ]; then return 0; fi
    if [ "$1" = no ] && [ -z "$has" ]; then return 0; fi
    sleep 0.5
  done
  echo "error: gpu-1 taint did not become '$1'" >&2; kubectl describe node gpu-1 >&2; exit 1
}
wait_taint yes
kubectl get node gpu-1 -o jsonpath='{range .spec.taints[*]}taint {.key}={.value}:{.effect}{"\n"}{end}{range .status.conditions[?(@.type=="GpuReady")]}condition GpuReady={.status} {.reason}: {.message}{"\n"}{end}'
kubectl get gnp

say "the GPU is repaired (allocatable 1): the controller releases the node"
status 1
wait_taint no
kubectl get node gpu-1 -L gpuready.io/ready
kubectl get gnp

say "helm uninstall: the pre-delete hook stops the controller and releases the nodes"
status 0
wait_taint yes
helm uninstall gpuready -n gpuready-system --wait --timeout 5m
wait_taint no
echo "gpu-1 after uninstall: taints $(kubectl get node gpu-1 -o jsonpath='{.spec.taints[*].key}'), labels $(kubectl get node gpu-1 -o jsonpath='{.metadata.labels}' | tr ',' '\n' | grep -c gpuready.io || true) gpuready.io/ label(s)"
say "done"
