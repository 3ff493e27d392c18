#!/usr/bin/env bash
# Brings GitOps to the cluster tests/cluster/up.sh started in DIR, the way a
# user of deploy/flux/ runs it, with nothing from outside this machine:
#
#   1. a local OCI registry (CNCF Distribution) on the node's address
#      10.200.0.2:5000, which the node's containerd pulls from over plain HTTP
#      (a hosts.toml for that address only, DIR/config/certs.d);
#   2. the release path rehearsed: the operator and probe images of this
#      checkout (image.sh) pushed with crane, the chart pushed with
#      `helm push` as an OCI artifact at its version, and Flux's own images;
#   3. a Git server (git http-backend behind git-server/) on 10.200.0.2:5001
#      serving DIR/git/gpuready.git: this checkout's deploy/flux/, where only
#      the served copy's gpuready/kustomization.yaml gains a kustomize patch
#      pointing the HelmRepository at the local registry and the HelmRelease's
#      image at the pushed one (the shipped layout is not edited);
#   4. Flux's source-controller, kustomize-controller and helm-controller as
#      Pods (flux/controllers.yaml) with their CRDs (flux-build.sh builds all);
#   5. the bootstrap `flux bootstrap` would make: a GitRepository flux-system
#      on the served repository and a Kustomization flux-system syncing
#      ./deploy/flux/clusters/my-cluster, which applies gpuready.yaml.
#
# The registry and the Git server listen only inside the cluster's network
# namespace; the host reaches them through socat pairs on free 127.0.0.1
# ports (like the API server). The last two lines printed are
#   REGISTRY=127.0.0.1:<port>       push here from the host (in the cluster: 10.200.0.2:5000)
#   GIT=http://127.0.0.1:<port>/gpuready.git   clone and push here from the host
# tests/cluster/down.sh DIR stops all of it with the cluster. Needs root and
# what tests/cluster/build.sh and tests/cluster/flux-build.sh build.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
[ $# -eq 1 ] || { echo "usage: tests/cluster/flux-up.sh DIR   (DIR: a cluster of tests/cluster/up.sh)" >&2; exit 2; }
dir=$(cd "$1" && pwd)
began=$SECONDS
step() { printf '==> [%3ss] %s\n' "$((SECONDS - began))" "$*" >&2; }
die() { echo "error: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "flux-up.sh needs root (it enters the cluster's namespaces)"
[ -f "$dir/pids/holder" ] && kill -0 "$(cat "$dir/pids/holder")" 2>/dev/null \
  || die "no running cluster in $dir: run tests/cluster/up.sh $dir first"
[ ! -e "$dir/pids/registry" ] || die "$dir already runs flux-up.sh's services; run tests/cluster/down.sh $dir first"
holder=$(cat "$dir/pids/holder")

assets=$(bash "$here/../control-plane/build.sh" --print-dir)
bin=$(bash "$here/build.sh" --print-dir)
flux=$(bash "$here/flux-build.sh" --print-dir)
for f in "$assets/kubectl" "$assets/helm" "$bin/crane" "$flux/registry" "$flux/git-server" \
         "$flux/images/source-controller.tar" "$flux/images/kustomize-controller.tar" \
         "$flux/images/helm-controller.tar" "$flux/crds/source-controller.yaml"; do
  [ -e "$f" ] || die "$f is missing: run tests/cluster/build.sh and tests/cluster/flux-build.sh"
done
command -v git >/dev/null || die "git is not installed (Debian package git)"
kubectl=$assets/kubectl
helm=$assets/helm
crane=$bin/crane
export KUBECONFIG="$dir/kubeconfig" KUBECACHEDIR="$dir/kube-cache"
export HELM_CACHE_HOME="$dir/helm/cache" HELM_CONFIG_HOME="$dir/helm/config" HELM_DATA_HOME="$dir/helm/data"
# Git run by this script: no user or system configuration, a fixed identity.
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=flux-up GIT_AUTHOR_EMAIL=flux-up@gpuready.local
export GIT_COMMITTER_NAME=flux-up GIT_COMMITTER_EMAIL=flux-up@gpuready.local

# Addresses inside the cluster's network namespace (up.sh's node IP).
node_ip=10.200.0.2
registry_in=$node_ip:5000
git_in=$node_ip:5001
# source-controller's Service: the artifact URLs carry it (no cluster DNS).
source_ip=10.96.0.90

# start, wait_for (tests/cluster/ns-lib.sh); a failed wait shows these logs.
# shellcheck source=tests/cluster/ns-lib.sh
. "$here/ns-lib.sh"
wait_logs="$dir/logs/registry.log $dir/logs/git-server.log"
# host_port NAME TARGET: a free 127.0.0.1 port on the host bridged through a
# unix socket in DIR to TARGET inside the namespace (socat pair); prints it.
host_port() {
  local name=$1 target=$2 port=""
  start "socat-$name-inside" socat "UNIX-LISTEN:$dir/$name.sock,fork,mode=600" "TCP:$target"
  for _ in $(seq 1 20); do
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    socat "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork" "UNIX-CONNECT:$dir/$name.sock" \
      >"$dir/logs/socat-$name-host.log" 2>&1 &
    echo $! > "$dir/pids/socat-$name-host"
    sleep 0.2
    kill -0 "$(cat "$dir/pids/socat-$name-host")" 2>/dev/null && break
    port=""
  done
  [ -n "$port" ] || die "socat found no free port on 127.0.0.1"
  echo "$port"
}

# ---------------------------------------------------------------- registry
step "registry (Distribution $("$flux/registry" --version | awk '{print $3}')) on $registry_in"
mkdir -p "$dir/registry/data" "$dir/git"
cat > "$dir/config/registry.yaml" <<EOF
version: 0.1
log: {level: info, formatter: text}
storage:
  filesystem: {rootdirectory: $dir/registry/data}
  delete: {enabled: true}
http:
  addr: $registry_in
EOF
# No tracing exporter: there is nothing to send spans to.
start registry env OTEL_TRACES_EXPORTER=none "$flux/registry" serve "$dir/config/registry.yaml"
registry_port=$(host_port registry "$registry_in")
registry_host=127.0.0.1:$registry_port
echo "$registry_port" > "$dir/registry-port"
wait_for "the registry" 30 python3 -c "import urllib.request; urllib.request.urlopen('http://$registry_host/v2/')"
# containerd: plain HTTP for this one address (read at each pull, no restart).
mkdir -p "$dir/config/certs.d/$registry_in"
cat > "$dir/config/certs.d/$registry_in/hosts.toml" <<EOF
server = "http://$registry_in"
[host."http://$registry_in"]
  capabilities = ["pull", "resolve"]
EOF

# ---------------------------------------------------------------- release path
step "pushing images and the chart to the registry (as the release workflow would)"
push() { "$crane" push --insecure "$1" "$2" >/dev/null; }
for c in source-controller kustomize-controller helm-controller; do
  push "$flux/images/$c.tar" "$registry_host/flux/$c:$(cat "$flux/images/$c.version")"
done
target_dir=$(cd "$repo" && cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
# The images of this checkout: those tests/run.sh built (it exports
# GPUREADY_E2E_IMAGE and GPUREADY_E2E_PROBE_IMAGE; no cargo build from inside a
# running cargo test), otherwise image.sh builds them now.
operator=${GPUREADY_E2E_IMAGE:-$(bash "$here/image.sh" | tail -n 1)}
probe=${GPUREADY_E2E_PROBE_IMAGE:-$(bash "$here/image.sh" --probe | tail -n 1)}
image_tag=${operator##*:}
probe_tag=${probe##*:}
push "$target_dir/cluster-images/gpuready-$image_tag.tar" "$registry_host/gpuready/gpuready:$image_tag"
push "$target_dir/cluster-images/gpuready-probe-$probe_tag.tar" "$registry_host/gpuready/gpuready-probe:$probe_tag"
chart_version=$(awk '$1 == "version:" {print $2; exit}' "$repo/charts/gpuready/Chart.yaml")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$helm" package "$repo/charts/gpuready" --destination "$tmp" >/dev/null
"$helm" push "$tmp/gpuready-$chart_version.tgz" "oci://$registry_host/charts" --plain-http >&2
echo "$image_tag" > "$dir/flux-image-tag"

# ---------------------------------------------------------------- Git server
step "Git server on $git_in"
git init -q --bare -b main "$dir/git/gpuready.git"
git -C "$dir/git/gpuready.git" config http.receivepack true
git clone -q "$dir/git/gpuready.git" "$tmp/work" 2>/dev/null
# An empty clone's branch follows the local default, not the remote's.
git -C "$tmp/work" symbolic-ref HEAD refs/heads/main
mkdir -p "$tmp/work/deploy"
cp -r "$repo/deploy/flux" "$tmp/work/deploy/flux"
# The served copy only: the chart and the image from the local registry.
cat >> "$tmp/work/deploy/flux/gpuready/kustomization.yaml" <<EOF
# Added by tests/cluster/flux-up.sh to the served copy (not in the shipped
# layout): the chart and the image from the cluster's local registry.
patches:
  - target: {kind: HelmRepository, name: gpuready}
    patch: |
      - {op: replace, path: /spec/url, value: "oci://$registry_in/charts"}
      - {op: add, path: /spec/insecure, value: true}
  - target: {kind: HelmRelease, name: gpuready}
    patch: |
      - {op: add, path: /spec/values/image, value: {repository: "$registry_in/gpuready/gpuready", tag: "$image_tag"}}
EOF
git -C "$tmp/work" add -A
git -C "$tmp/work" commit -q -m "deploy/flux from gpuready $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo checkout), local registry"
git -C "$tmp/work" push -q origin main
start git-server "$flux/git-server" -listen "$git_in" -root "$dir/git"
git_port=$(host_port git "$git_in")
echo "$git_port" > "$dir/git-port"
git_url=http://127.0.0.1:$git_port/gpuready.git
wait_for "the Git server" 30 git ls-remote "$git_url"

# ---------------------------------------------------------------- Flux
step "Flux's controllers and CRDs"
for c in source-controller kustomize-controller helm-controller; do
  "$kubectl" apply --server-side -f "$flux/crds/$c.yaml" >/dev/null
done
sed -e "s|@REGISTRY@|$registry_in|g" -e "s|@SOURCE_IP@|$source_ip|g" \
    -e "s|@SOURCE_VERSION@|$(cat "$flux/images/source-controller.version")|g" \
    -e "s|@KUSTOMIZE_VERSION@|$(cat "$flux/images/kustomize-controller.version")|g" \
    -e "s|@HELM_VERSION@|$(cat "$flux/images/helm-controller.version")|g" \
    "$here/flux/controllers.yaml" | "$kubectl" apply -f - >/dev/null
"$kubectl" wait --for condition=Established --timeout 60s \
  crd/gitrepositories.source.toolkit.fluxcd.io crd/kustomizations.kustomize.toolkit.fluxcd.io \
  crd/helmreleases.helm.toolkit.fluxcd.io >/dev/null
"$kubectl" -n flux-system rollout status --timeout 180s \
  deploy/source-controller deploy/kustomize-controller deploy/helm-controller >&2

step "bootstrap: GitRepository and Kustomization flux-system (./deploy/flux/clusters/my-cluster)"
"$kubectl" apply -f - >/dev/null <<EOF
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 1m0s
  ref: {branch: main}
  url: http://$git_in/gpuready.git
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 10m0s
  path: ./deploy/flux/clusters/my-cluster
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system}
EOF
"$kubectl" -n flux-system wait --for condition=Ready --timeout 120s gitrepository/flux-system >/dev/null \
  || die "GitRepository flux-system not Ready: $("$kubectl" -n flux-system get gitrepository flux-system -o yaml)"
step "Flux up: chart $chart_version and image $image_tag in the registry, flux-system syncing"
echo "IN_CLUSTER_REGISTRY=$registry_in"
echo "REGISTRY=$registry_host"
echo "GIT=$git_url"
