#!/usr/bin/env bash
# The test command: builds the real control plane once (cached under
# ~/.cache/gpuready), then runs every test of the workspace against it and ends
# with one line of totals.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
  bash tests/control-plane/build.sh >/dev/null
  KUBEBUILDER_ASSETS=$(bash tests/control-plane/build.sh --print-dir)
  export KUBEBUILDER_ASSETS
fi
# Also when KUBEBUILDER_ASSETS was given: the upstream NFD CRD files are a
# separate cache (a no-op once fetched).
bash tests/control-plane/nfd-crds.sh >/dev/null
echo "control plane: $KUBEBUILDER_ASSETS" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --locked "$@" 2>&1 | tee "$log" || status=$?
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
