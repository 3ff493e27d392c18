#!/usr/bin/env bash
# Fetches the upstream NFD CRD manifests the tests need from the Go module proxy
# (the module sigs.k8s.io/node-feature-discovery holds them) into a cache folder
# outside the clone, one file per release. A no-op for files already cached.
# Prints the folder on its last line.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/build-lib.sh
. "$here/../lib/build-lib.sh"
module=sigs.k8s.io/node-feature-discovery
manifest=deployment/base/nfd-crds/nfd-api-crds.yaml
dir="$cache_root/nfd-crds"

usage() {
  cat <<USAGE
usage: tests/control-plane/nfd-crds.sh [--print-dir]

Downloads $module at each release listed in
$here/nfd-crds.versions with 'go mod download' (checked against the Go
checksum database like any module) and copies its $manifest to
  \${GPUREADY_CACHE:-~/.cache/gpuready}/nfd-crds/<release>.yaml
where the tests find it.

  --print-dir   print the folder and exit (fetches nothing)
USAGE
}

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --print-dir) echo "$dir"; exit 0 ;;
  "") ;;
  *) usage >&2; exit 2 ;;
esac

mkdir -p "$dir"
# Outside any module, so no go.mod nearby changes what is resolved.
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
grep -v '^#' "$here/nfd-crds.versions" | while read -r version; do
  [ -n "$version" ] || continue
  [ -s "$dir/$version.yaml" ] && continue
  printf '==> fetching NFD %s CRDs from the Go module proxy\n' "$version" >&2
  json=$(cd "$work" && GO111MODULE=on GOFLAGS=-mod=mod go mod download -json "$module@$version") || {
    echo "error: 'go mod download $module@$version' failed; is the Go module proxy reachable (GOPROXY)?" >&2
    echo "$json" >&2; exit 1; }
  moddir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [ -f "$moddir/$manifest" ] || { echo "error: $module@$version has no $manifest (module dir '$moddir')" >&2; exit 1; }
  # Copy then rename, so a test reading concurrently never sees half a file.
  cp "$moddir/$manifest" "$dir/$version.yaml.tmp.$$"
  chmod 0644 "$dir/$version.yaml.tmp.$$"
  mv "$dir/$version.yaml.tmp.$$" "$dir/$version.yaml"
done
echo "$dir"
