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
# The NVIDIA DRA driver's ComputeDomainClique CRD, likewise.
bash tests/control-plane/dra-driver-crds.sh >/dev/null
# promtool for the rule unit tests (crates/gpuready/tests/monitoring_rules.rs),
# from Debian's package, cached (tests/monitoring/build.sh).
bash tests/monitoring/build.sh --promtool >/dev/null || echo "tests/run.sh: promtool could not be fetched; monitoring_rules will fail and say why" >&2
echo "control plane: $KUBEBUILDER_ASSETS" >&2
# The end-to-end suites (crates/gpuready/tests/cluster_e2e.rs: the Helm chart;
# flux_e2e.rs: Flux reconciling deploy/flux; monitoring_e2e.rs: a real
# Prometheus on the chart's metrics and alerts) run in a real single-node cluster:
# they need root (namespaces, mounts, cgroups), the node binaries and the images
# built from this checkout. Without root, or with GPUREADY_CLUSTER_E2E=0, they
# print NOT RUN (GPUREADY_FLUX_E2E=0 skips the Flux suite alone).
if [ "$(id -u)" = 0 ] && [ "${GPUREADY_CLUSTER_E2E:-1}" != 0 ]; then
  bash tests/cluster/build.sh >/dev/null
  # The Flux suite (crates/gpuready/tests/flux_e2e.rs): Flux's controllers, the
  # registry and the Git server (tests/cluster/flux-build.sh, cached).
  if [ "${GPUREADY_FLUX_E2E:-1}" != 0 ]; then
    bash tests/cluster/flux-build.sh >/dev/null
    export GPUREADY_FLUX_E2E=1
  fi
  # The live monitoring suite (crates/gpuready/tests/monitoring_e2e.rs):
  # Prometheus from its Go module and its image, the Operator's CRDs, the
  # dashboard schema checker (tests/monitoring/build.sh, cached).
  bash tests/monitoring/build.sh >/dev/null
  # The images carry the dev-profile binary: the same code, and cargo test
  # builds most of it anyway, where a release build would be a second full
  # build of the workspace (docs/testing.md).
  export GPUREADY_IMAGE_PROFILE=${GPUREADY_IMAGE_PROFILE:-dev}
  GPUREADY_E2E_IMAGE=$(bash tests/cluster/image.sh | tail -n 1)
  GPUREADY_E2E_PROBE_IMAGE=$(bash tests/cluster/image.sh --probe | tail -n 1)
  images=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/cluster-images
  GPUREADY_E2E_IMAGE_TARS="$images/gpuready-${GPUREADY_E2E_IMAGE##*:}.tar $images/gpuready-probe-${GPUREADY_E2E_PROBE_IMAGE##*:}.tar"
  GPUREADY_CLUSTER_E2E=1
  export GPUREADY_CLUSTER_E2E GPUREADY_E2E_IMAGE GPUREADY_E2E_PROBE_IMAGE GPUREADY_E2E_IMAGE_TARS
  echo "cluster images: $GPUREADY_E2E_IMAGE $GPUREADY_E2E_PROBE_IMAGE" >&2
else
  unset GPUREADY_CLUSTER_E2E GPUREADY_FLUX_E2E
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --locked "$@" 2>&1 | tee "$log" || status=$?
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
