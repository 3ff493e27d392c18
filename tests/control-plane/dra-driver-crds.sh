#!/usr/bin/env bash
# Fetches the NVIDIA DRA driver's ComputeDomainClique CRD, as the driver
# ships it, from the Go module proxy (the module sigs.k8s.io/dra-driver-nvidia-gpu
# holds its Helm chart's CRDs) into a cache folder outside the clone. A no-op
# once cached. Prints the file on its last line.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/build-lib.sh
. "$here/../lib/build-lib.sh"
module=sigs.k8s.io/dra-driver-nvidia-gpu
version=v0.4.1
manifest=deployments/helm/dra-driver-nvidia-gpu/crds/resource.nvidia.com_computedomaincliques.yaml
dir="$cache_root/dra-driver-crds/$version"
file="$dir/computedomaincliques.yaml"

case "${1:-}" in
  -h|--help)
    cat <<USAGE
usage: tests/control-plane/dra-driver-crds.sh [--print-path]

Downloads $module@$version with 'go mod download' (checked against the Go
checksum database like any module) and copies its
  $manifest
to $file, where the tests find it.

  --print-path   print the file and exit (fetches nothing)
USAGE
    exit 0 ;;
  --print-path) echo "$file"; exit 0 ;;
  "") ;;
  *) echo "usage: tests/control-plane/dra-driver-crds.sh [--print-path]" >&2; exit 2 ;;
esac

if [ ! -s "$file" ]; then
  mkdir -p "$dir"
  # Outside any module, so no go.mod nearby changes what is resolved.
  work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
  step "fetching the NVIDIA DRA driver $version CRDs from the Go module proxy"
  json=$(cd "$work" && GO111MODULE=on GOFLAGS=-mod=mod go mod download -json "$module@$version") || {
    echo "error: 'go mod download $module@$version' failed; is the Go module proxy reachable (GOPROXY)?" >&2
    echo "$json" >&2; exit 1; }
  moddir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [ -f "$moddir/$manifest" ] || { echo "error: $module@$version has no $manifest (module dir '$moddir')" >&2; exit 1; }
  # Copy then rename, so a test reading concurrently never sees half a file.
  cp "$moddir/$manifest" "$file.tmp.$$"
  chmod 0644 "$file.tmp.$$"
  mv "$file.tmp.$$" "$file"
fi
echo "$file"
