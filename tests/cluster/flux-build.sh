#!/usr/bin/env bash
# Builds what tests/cluster/flux-up.sh needs beside the cluster of up.sh:
# Flux's source-controller, kustomize-controller and helm-controller at one Flux
# release (flux/*/go.mod), their CRDs from the same modules, an image of each
# (image-tar.sh), the CNCF Distribution registry (registry/go.mod) and the small
# Git server (git-server/). Everything lands in cache folders outside the clone,
# keyed by version (the Git server by the hash of its source); a no-op when
# present. Prints the Flux folder on its last line.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/build-lib.sh
. "$here/../lib/build-lib.sh"

usage() {
  cat <<EOF
usage: tests/cluster/flux-build.sh [--print-dir]

Results go to
  \${GPUREADY_CACHE:-~/.cache/gpuready}/flux-<release>/      controllers, images/, crds/
  \${GPUREADY_CACHE:-~/.cache/gpuready}/tools/registry-<version>/
  \${GPUREADY_CACHE:-~/.cache/gpuready}/tools/git-server-<hash>/
The Flux folder also holds registry and git-server links, so that one folder
names everything flux-up.sh runs. Needs crane from tests/cluster/build.sh.

  --print-dir   print the Flux folder and exit (builds nothing)

Bumping Flux: take the controller versions of the release from the flux2
module's manifests/bases/*/kustomization.yaml (github.com/fluxcd/flux2/v2), set
them in flux/*/go.mod together with the replaces of each controller's own
go.mod (all but the one of its ./api), run 'go mod tidy -e' there, and set
FLUX_RELEASE below.
EOF
}

# The Flux release whose controllers flux/*/go.mod pin (its flux2 manifests name
# source-controller v1.9.5, kustomize-controller v1.9.5, helm-controller v1.6.4).
FLUX_RELEASE=v2.9.5
controllers=(source-controller kustomize-controller helm-controller)

registry_version=$(module_version github.com/distribution/distribution/v3 "$here/registry/go.mod")
git_server_hash=$(cat "$here/git-server/go.mod" "$here/git-server/main.go" | sha256sum | cut -c1-12)
out="$cache_root/flux-$FLUX_RELEASE"
registry_dir="$cache_root/tools/registry-$registry_version"
git_server_dir="$cache_root/tools/git-server-$git_server_hash"

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --print-dir) echo "$out"; exit 0 ;;
  "") ;;
  *) usage >&2; exit 2 ;;
esac

export GOTOOLCHAIN=local CGO_ENABLED=0
mkdir -p "$out/crds" "$out/images" "$registry_dir" "$git_server_dir"

controller_version() { module_version "github.com/fluxcd/$1" "$here/flux/$1/go.mod"; }

build_controllers() {
  local c
  for c in "${controllers[@]}"; do
    go_build_once "$out/$c" "$here/flux/$c" \
      "$c $(controller_version "$c") (Flux $FLUX_RELEASE; cold: several minutes each on 2 cores)" \
      -ldflags "-s -w" "github.com/fluxcd/$c"
  done
}

# The CRDs ship in each controller's module (config/crd/bases), the files a
# Flux release's manifests are made from.
copy_crds() {
  local c v dir f
  for c in "${controllers[@]}"; do
    [ -f "$out/crds/$c.yaml" ] && continue
    v=$(controller_version "$c")
    dir=$(cd "$here/flux/$c" && go mod download -json "github.com/fluxcd/$c@$v" \
      | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
    [ -d "$dir/config/crd/bases" ] || { echo "error: $dir/config/crd/bases not found" >&2; exit 1; }
    for f in "$dir"/config/crd/bases/*.yaml; do echo "---"; cat "$f"; done > "$out/crds/$c.yaml.tmp"
    mv "$out/crds/$c.yaml.tmp" "$out/crds/$c.yaml"
  done
}

# One image per controller in the shape of upstream's (the static binary, run
# as 65534, the CA bundle); flux-up.sh pushes them to the local registry.
build_images() {
  local c v root crane
  crane=$(bash "$here/build.sh" --print-dir)/crane
  [ -x "$crane" ] || { echo "error: crane is missing: run tests/cluster/build.sh first" >&2; exit 1; }
  for c in "${controllers[@]}"; do
    [ -f "$out/images/$c.tar" ] && continue
    v=$(controller_version "$c")
    root=$(mktemp -d)
    install -D -m 0755 "$out/$c" "$root/usr/local/bin/$c"
    mkdir -p "$root/etc/ssl/certs"
    cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
    echo 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' > "$root/etc/passwd"
    echo 'nogroup:x:65534:' > "$root/etc/group"
    "$here/image-tar.sh" --crane "$crane" --root "$root" --name "gpuready.local/flux/$c:$v" \
      --entrypoint "/usr/local/bin/$c" --user 65534:65534 --output "$out/images/$c.tar.tmp"
    rm -rf "$root"
    mv "$out/images/$c.tar.tmp" "$out/images/$c.tar"
    echo "$v" > "$out/images/$c.version"
  done
}

build_registry() {
  ln -sfn "$registry_dir/registry" "$out/registry"
  go_build_once "$registry_dir/registry" "$here/registry" "the Distribution registry $registry_version" \
    -ldflags "-s -w -X github.com/distribution/distribution/v3/version.version=$registry_version" \
    github.com/distribution/distribution/v3/cmd/registry
}

build_git_server() {
  ln -sfn "$git_server_dir/git-server" "$out/git-server"
  go_build_once "$git_server_dir/git-server" "$here/git-server" "the Git server" -ldflags "-s -w" .
}

verify() {
  local c
  for c in "${controllers[@]}"; do
    "$out/$c" --help >/dev/null 2>&1 || { echo "error: $out/$c does not run; delete it and rerun" >&2; exit 1; }
  done
  "$registry_dir/registry" --version >&2
  command -v git >/dev/null && [ -x "$(git --exec-path)/git-http-backend" ] || {
    echo "error: git and its git-http-backend are needed (Debian package git)" >&2; exit 1; }
  echo "Flux $FLUX_RELEASE: $(for c in "${controllers[@]}"; do printf '%s %s, ' "$c" "$(controller_version "$c")"; done)" >&2
}

build_registry
build_git_server
build_controllers
copy_crds
build_images
verify
echo "$out"
