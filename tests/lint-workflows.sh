#!/usr/bin/env bash
# Lints the GitHub Actions workflows with actionlint, built from its Go module
# (through the Go module proxy, like the control plane) and cached in
# ${GPUREADY_CACHE:-~/.cache/gpuready}/tools/. A no-op build once cached.
set -euo pipefail
cd "$(dirname "$0")/.."
version=v1.7.12
dir="${GPUREADY_CACHE:-$HOME/.cache/gpuready}/tools/actionlint-$version"
if [ ! -x "$dir/actionlint" ]; then
  printf '==> building actionlint %s from its Go module\n' "$version" >&2
  mkdir -p "$dir"
  # Outside any module, so no go.mod nearby changes what is resolved.
  (cd "$(mktemp -d)" && GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$dir" GOFLAGS=-mod=mod \
    go install "github.com/rhysd/actionlint/cmd/actionlint@$version")
fi
"$dir/actionlint" -no-color .github/workflows/*.yml
echo "actionlint $version: .github/workflows clean" >&2
