#!/usr/bin/env bash
# The test command: builds the real control plane once (cached under
# ~/.cache/gpuready), then runs every test of the workspace against it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
  bash tests/control-plane/build.sh >/dev/null
  KUBEBUILDER_ASSETS=$(bash tests/control-plane/build.sh --print-dir)
  export KUBEBUILDER_ASSETS
fi
echo "control plane: $KUBEBUILDER_ASSETS" >&2
exec cargo test --workspace --locked "$@"
