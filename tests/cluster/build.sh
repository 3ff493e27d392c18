#!/usr/bin/env bash
# Builds what the project's real single-node cluster (tests/cluster/up.sh) needs
# beside the control plane of tests/control-plane: kubelet,
# kube-controller-manager, kube-scheduler and kube-proxy from Go modules at
# exactly the kube-apiserver's Kubernetes version, crane (the image tool of
# image.sh), and the pause image from the pause.c that ships in the
# k8s.io/kubernetes module. Installs containerd, runc, the CNI plugins,
# iptables and socat from Debian packages when they are missing. Everything
# built lands in a cache folder outside the clone; a no-op when present.
# Prints that folder on its last line.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cp_dir=$(cd "$here/../control-plane" && pwd)
# shellcheck source=tests/lib/build-lib.sh
. "$here/../lib/build-lib.sh"

usage() {
  cat <<EOF
usage: tests/cluster/build.sh [--print-dir]

Builds the node binaries ($here/node-binaries/go.mod) and crane
($here/crane/go.mod) with the machine's Go, the pause image with gcc, and
installs the Debian packages containerd, runc, containernetworking-plugins,
iptables and socat when one is missing (apt-get; needs root). Results go to
  \${GPUREADY_CACHE:-~/.cache/gpuready}/cluster/k8s-<version>/
The control plane (kube-apiserver, etcd, kubectl, helm) is tests/control-plane/build.sh's.

  --print-dir   print the folder and exit (builds nothing)

Bumping Kubernetes: first bump tests/control-plane (see its build.sh --help),
then set the same k8s.io/kubernetes version and staging replaces in
node-binaries/go.mod (copy them from ../control-plane/kube-apiserver/go.mod) and
run 'go mod tidy' there. This script refuses to build when the two differ: the
kubelet must be the apiserver's release.
EOF
}

k8s_version=$(module_version k8s.io/kubernetes "$cp_dir/kube-apiserver/go.mod")
node_version=$(module_version k8s.io/kubernetes "$here/node-binaries/go.mod")
crane_version=$(module_version github.com/google/go-containerregistry "$here/crane/go.mod")
[ -n "$k8s_version" ] && [ -n "$node_version" ] && [ -n "$crane_version" ] || {
  echo "error: cannot read pinned versions from the go.mod files" >&2; exit 1; }
if [ "$k8s_version" != "$node_version" ]; then
  echo "error: tests/cluster/node-binaries/go.mod pins k8s.io/kubernetes $node_version but the kube-apiserver" >&2
  echo "       of tests/control-plane is $k8s_version: a cluster's kubelet must be the apiserver's release." >&2
  echo "       Bump both together (tests/cluster/build.sh --help)." >&2
  exit 1
fi
# Every staging module must be replaced with the same version in both modules.
staging_diff=$(diff <(grep -E '^\s+k8s\.io/[a-z-]+ => ' "$cp_dir/kube-apiserver/go.mod" | sort) \
                    <(grep -E '^\s+k8s\.io/[a-z-]+ => ' "$here/node-binaries/go.mod" | sort) || true)
if [ -n "$staging_diff" ]; then
  echo "error: the staging replaces of tests/cluster/node-binaries/go.mod differ from tests/control-plane/kube-apiserver/go.mod:" >&2
  echo "$staging_diff" >&2
  exit 1
fi

out="$cache_root/cluster/k8s-$k8s_version"
crane_dir="$cache_root/tools/crane-$crane_version"

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --print-dir) echo "$out"; exit 0 ;;
  "") ;;
  *) usage >&2; exit 2 ;;
esac

mkdir -p "$out" "$crane_dir"
export GOTOOLCHAIN=local

# Debian packages: the container runtime, the CNI plugins, iptables (kube-proxy
# and the bridge plugin's masquerade) and socat (the host's bridge to the API
# server, see up.sh); gcc and the static libc for the pause binary.
install_packages() {
  local missing=()
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] || missing+=(containernetworking-plugins)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v socat >/dev/null || missing+=(socat)
  command -v gcc >/dev/null || missing+=(gcc)
  [ -f /usr/lib/x86_64-linux-gnu/libc.a ] || [ -f /usr/lib/aarch64-linux-gnu/libc.a ] || missing+=(libc6-dev)
  [ -x /bin/busybox ] || missing+=(busybox-static)
  command -v ip >/dev/null || missing+=(iproute2)
  command -v nsenter >/dev/null || missing+=(util-linux)
  [ ${#missing[@]} -eq 0 ] && return
  step "installing Debian packages: ${missing[*]}"
  local start=$SECONDS
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  step "packages installed in $((SECONDS - start))s"
}

ldflags() {
  local minor=${k8s_version#v1.}; minor=${minor%%.*}
  local ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld="$ld -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$ld"
}

# The same flags as tests/control-plane's kube-apiserver, so the Go build cache
# it filled serves most packages here.
build_node_binaries() {
  local todo=()
  for b in kubelet kube-controller-manager kube-scheduler kube-proxy; do
    [ -x "$out/$b" ] || todo+=("$b")
  done
  [ ${#todo[@]} -eq 0 ] && return
  local ld; ld=$(ldflags)
  for b in "${todo[@]}"; do
    go_build_once "$out/$b" "$here/node-binaries" \
      "$b $k8s_version (cold, after the control plane: kubelet about 5 min on 2 cores, the others 1-2 min each)" \
      -tags selinux,notest -ldflags "$ld" "k8s.io/kubernetes/cmd/$b"
  done
}

build_crane() {
  # image.sh finds crane beside the node binaries.
  ln -sfn "$crane_dir/crane" "$out/crane"
  go_build_once "$crane_dir/crane" "$here/crane" "crane $crane_version" \
    -ldflags "-s -w" github.com/google/go-containerregistry/cmd/crane
}

# The sandbox ("pause") image, from the source Kubernetes ships in its module.
build_pause() {
  [ -f "$out/pause.tar" ] && return
  local src
  src="$(cd "$here/node-binaries" && go env GOMODCACHE)/k8s.io/kubernetes@$k8s_version/build/pause/linux/pause.c"
  [ -f "$src" ] || (cd "$here/node-binaries" && go mod download k8s.io/kubernetes)
  [ -f "$src" ] || { echo "error: $src not found in the Go module cache" >&2; exit 1; }
  step "building the pause image from $src"
  local tmp; tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
  mkdir -p "$tmp/root"
  gcc -Os -Wall -Werror -static -DVERSION="$k8s_version" -o "$tmp/root/pause" "$src"
  strip "$tmp/root/pause"
  "$here/image-tar.sh" --crane "$crane_dir/crane" --root "$tmp/root" --name "$(pause_image)" \
    --entrypoint /pause --user 65535:65535 --output "$out/pause.tar.tmp"
  mv "$out/pause.tar.tmp" "$out/pause.tar"
}

pause_image() { echo "gpuready.local/pause:$k8s_version"; }

# A small client image for the tests (a shell, nc, wget, sleep): Debian's
# static busybox, run as 65532 so it is also admitted where the restricted Pod
# Security Standard is enforced.
build_busybox() {
  [ -f "$out/busybox.tar" ] && return
  local version; version=$(dpkg-query -W -f '${Version}' busybox-static | tr -c 'a-zA-Z0-9._\n-' '_')
  step "building the busybox image ($version)"
  local tmp; tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
  mkdir -p "$tmp/root/bin"
  cp /bin/busybox "$tmp/root/bin/busybox"
  for a in sh nc wget sleep cat; do ln -s busybox "$tmp/root/bin/$a"; done
  "$here/image-tar.sh" --crane "$crane_dir/crane" --root "$tmp/root" --name "gpuready.local/busybox:$version" \
    --entrypoint /bin/sh --user 65532:65532 --output "$out/busybox.tar.tmp"
  mv "$out/busybox.tar.tmp" "$out/busybox.tar"
  echo "gpuready.local/busybox:$version" > "$out/busybox.name"
}

verify() {
  local got
  for b in kubelet kube-controller-manager kube-scheduler kube-proxy; do
    got=$("$out/$b" --version 2>&1 | sed -n 1p)
    [ "$got" = "Kubernetes $k8s_version" ] || {
      echo "error: $out/$b reports '$got', expected $k8s_version; delete it and rerun" >&2; exit 1; }
  done
  echo "node binaries: Kubernetes $k8s_version" >&2
  "$crane_dir/crane" version >/dev/null
  pause_image > "$out/pause.name"
}

install_packages
build_crane
build_pause
build_busybox
build_node_binaries
verify
echo "$out"
