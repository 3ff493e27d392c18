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

grep -v '^#' "$here/nfd-crds.versions" | while read -r version; do
  [ -n "$version" ] || continue
  [ -s "$dir/$version.yaml" ] && continue
  step "fetching NFD $version CRDs from the Go module proxy"
  module_file "$module" "$version" "$manifest" "$dir/$version.yaml"
done
mkdir -p "$dir"
echo "$dir"
