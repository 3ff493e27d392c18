#!/usr/bin/env bash
# The local try-out: builds gpuready and the try-out program, makes sure the
# control plane the tests use is built (cached in ~/.cache/gpuready), then runs
# the story: a real etcd + kube-apiserver, the example clusters, `gpuready run`,
# a node tainted, repaired and released. Stops everything it started.
#
# tests/tryout.sh --cluster: the same story with the Helm chart's pods in a
# real single-node cluster (kubelet, containerd; needs root), see
# tests/cluster/tryout.sh and docs/testing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --cluster ]; then
  exec bash tests/cluster/tryout.sh
fi
if [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
  bash tests/control-plane/build.sh >/dev/null
fi
cargo build --locked -q -p gpuready --bin gpuready --example tryout
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
exec "$target_dir/debug/examples/tryout"
