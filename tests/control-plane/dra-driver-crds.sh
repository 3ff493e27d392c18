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
  step "fetching the NVIDIA DRA driver $version CRDs from the Go module proxy"
  module_file "$module" "$version" "$manifest" "$file"
fi
echo "$file"
