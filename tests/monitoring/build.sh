#!/usr/bin/env bash
# Fetches and builds what the monitoring tests need, into cache folders outside
# the clone keyed by version; a no-op when present:
#   promtool           from Debian's `prometheus` package (apt-get download and
#                      dpkg-deb -x: nothing is installed and no service starts),
#                      for `promtool check rules` / `promtool test rules`
#                      (crates/gpuready/tests/monitoring_rules.rs);
#   prometheus         the server, built from the github.com/prometheus/prometheus
#                      Go module (prometheus/go.mod) with only its Kubernetes
#                      service discovery, which Debian's build lacks, for the
#                      live suite (crates/gpuready/tests/monitoring_e2e.rs);
#   operator CRDs      the ServiceMonitor and PrometheusRule CRDs exactly as the
#                      Prometheus Operator releases them in its Go module;
#   dashboard-schema   a small checker (dashboard-schema/) that reads the Grafana
#                      dashboard with the Apache-2.0 Grafana Foundation SDK's
#                      strict decoders (never Grafana itself: AGPL).
# docs/install.md ("Monitoring") says why each comes from where.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/build-lib.sh
. "$here/../lib/build-lib.sh"

usage() {
  cat <<EOF
usage: tests/monitoring/build.sh [--promtool | --print-dir]

Without arguments: everything below. Results go to
  \${GPUREADY_CACHE:-~/.cache/gpuready}/monitoring/
    prometheus-<version>/prometheus, prometheus.tar (its image, when
                         tests/cluster/build.sh has built crane)
    prometheus-operator-crds-<version>/{servicemonitors,prometheusrules}.yaml
    dashboard-schema-<hash>/dashboard-schema
promtool, from Debian's prometheus package, is unpacked into
  \${GPUREADY_CACHE:-~/.cache/gpuready}/tools/promtool-deb-<Debian version>/
and linked from the monitoring folder. Last line: the monitoring folder.

  --promtool    only promtool; prints its path last (no Go, no root needed
                once Debian's package lists are there)
  --print-dir   print the monitoring folder and exit (builds nothing)

Bumping: Prometheus in prometheus/go.mod (then 'go mod tidy' there); the
Operator's release in OPERATOR_VERSION below; the SDK in dashboard-schema/go.mod.
EOF
}

# The Prometheus Operator release whose CRD files (example/prometheus-operator-crd/
# in its root module) validate the chart's ServiceMonitor and PrometheusRule.
OPERATOR_VERSION=v0.85.0

prom_module=$(module_version github.com/prometheus/prometheus "$here/prometheus/go.mod")
# Module v0.316.0 is Prometheus 3.16.0 (the module's v0.3xx.y are releases 3.xx.y).
prom_version=3.${prom_module#v0.3}; prom_version=${prom_version/#3.0/3.}
schema_hash=$(cat "$here/dashboard-schema/go.mod" "$here/dashboard-schema/main.go" | sha256sum | cut -c1-12)
out="$cache_root/monitoring"
prom_dir="$out/prometheus-$prom_version"
crds_dir="$out/prometheus-operator-crds-$OPERATOR_VERSION"
schema_dir="$out/dashboard-schema-$schema_hash"

# Debian's promtool: the candidate version of the `prometheus` package, unpacked.
promtool() { debian_file prometheus usr/bin/promtool promtool; }

build_prometheus() {
  go_build_once "$prom_dir/prometheus" "$here/prometheus" \
    "Prometheus $prom_version from its Go module with only the Kubernetes SD (cold: several minutes on 2 cores)" \
    -tags remove_all_sd,enable_kubernetes_sd \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$prom_version -X github.com/prometheus/common/version.Branch=module-$prom_module" \
    github.com/prometheus/prometheus/cmd/prometheus
}

fetch_operator_crds() {
  [ -f "$crds_dir/servicemonitors.yaml" ] && [ -f "$crds_dir/prometheusrules.yaml" ] && return
  step "fetching the Prometheus Operator $OPERATOR_VERSION CRDs (go mod download, checked against the Go checksum database)"
  local start=$SECONDS src
  src=$(cd "$here/prometheus" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod download -json \
    "github.com/prometheus-operator/prometheus-operator@$OPERATOR_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  mkdir -p "$crds_dir"
  for kind in servicemonitors prometheusrules; do
    cp "$src/example/prometheus-operator-crd/monitoring.coreos.com_$kind.yaml" "$crds_dir/$kind.yaml.tmp"
    chmod 644 "$crds_dir/$kind.yaml.tmp"
    mv "$crds_dir/$kind.yaml.tmp" "$crds_dir/$kind.yaml"
  done
  step "operator CRDs in $((SECONDS - start))s"
}

# The Prometheus server as an image for the cluster of tests/cluster (static
# binary, uid 65534), made with crane from tests/cluster/build.sh when that
# cluster is built (root only); the live suite imports it.
build_prometheus_image() {
  local crane; crane="$(bash "$here/../cluster/build.sh" --print-dir)/crane"
  [ -f "$prom_dir/prometheus.tar" ] && return
  if [ ! -x "$crane" ]; then
    step "no crane (tests/cluster/build.sh not run): the Prometheus image is not built"
    return
  fi
  local tmp; tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
  mkdir -p "$tmp/root/bin" "$tmp/root/prometheus" "$tmp/root/etc"
  cp "$prom_dir/prometheus" "$tmp/root/bin/prometheus"
  printf 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' > "$tmp/root/etc/passwd"
  "$here/../cluster/image-tar.sh" --crane "$crane" --root "$tmp/root" --name "gpuready.local/prometheus:$prom_version" \
    --entrypoint /bin/prometheus --user 65534:65534 --expose 9090/tcp --output "$prom_dir/prometheus.tar.tmp"
  mv "$prom_dir/prometheus.tar.tmp" "$prom_dir/prometheus.tar"
  echo "gpuready.local/prometheus:$prom_version" > "$prom_dir/prometheus.name"
}

build_dashboard_schema() {
  go_build_once "$schema_dir/dashboard-schema" "$here/dashboard-schema" \
    "the dashboard checker (Grafana Foundation SDK, Apache-2.0)" .
}

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --print-dir) echo "$out"; exit 0 ;;
  --promtool) mkdir -p "$out"; promtool; exit 0 ;;
  "") ;;
  *) usage >&2; exit 2 ;;
esac

mkdir -p "$out"
promtool >/dev/null
fetch_operator_crds
build_dashboard_schema
build_prometheus
build_prometheus_image
ln -sfn "$prom_dir" "$out/prometheus-server"
ln -sfn "$prom_dir/prometheus" "$out/prometheus"
ln -sfn "$crds_dir" "$out/operator-crds"
ln -sfn "$schema_dir/dashboard-schema" "$out/dashboard-schema"
ln -sfn "$(promtool)" "$out/promtool"
echo "$out"
