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

usage() {
  cat <<EOF
usage: tests/monitoring/build.sh [--promtool | --print-dir]

Without arguments: everything below. Results go to
  \${GPUREADY_CACHE:-~/.cache/gpuready}/monitoring/
    promtool-deb-<Debian version>/promtool
    prometheus-<version>/prometheus, prometheus.tar (its image, when
                         tests/cluster/build.sh has built crane)
    prometheus-operator-crds-<version>/{servicemonitors,prometheusrules}.yaml
    dashboard-schema-<hash>/dashboard-schema
Last line: the monitoring folder.

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

module_version() { awk -v m="$1" '($1==m){print $2; exit} ($1=="require" && $2==m){print $3; exit}' "$2"; }
prom_module=$(module_version github.com/prometheus/prometheus "$here/prometheus/go.mod")
# Module v0.316.0 is Prometheus 3.16.0 (the module's v0.3xx.y are releases 3.xx.y).
prom_version=3.${prom_module#v0.3}; prom_version=${prom_version/#3.0/3.}
schema_hash=$(cat "$here/dashboard-schema/go.mod" "$here/dashboard-schema/main.go" | sha256sum | cut -c1-12)
cache_root=${GPUREADY_CACHE:-$HOME/.cache/gpuready}
out="$cache_root/monitoring"
prom_dir="$out/prometheus-$prom_version"
crds_dir="$out/prometheus-operator-crds-$OPERATOR_VERSION"
schema_dir="$out/dashboard-schema-$schema_hash"

step() { printf '==> %s\n' "$*" >&2; }

# go_build MODULE_DIR OUTPUT ARGS...: a static build in a helper module, moved
# into place only once complete.
go_build() {
  local dir=$1 output=$2; shift 2
  mkdir -p "$(dirname "$output")"
  (cd "$dir" && GOTOOLCHAIN=local CGO_ENABLED=0 go build -mod=mod -trimpath -o "$output.tmp" "$@")
  mv "$output.tmp" "$output"
}

# Debian's promtool: the candidate version of the `prometheus` package, unpacked.
promtool() {
  local have
  have=$(ls -d "$out"/promtool-deb-*/promtool 2>/dev/null | tail -n 1 || true)
  if [ -n "$have" ] && "$have" --version >/dev/null 2>&1; then echo "$have"; return; fi
  local version
  version=$(apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ {print $2}')
  if [ -z "$version" ] || [ "$version" = "(none)" ]; then
    step "apt-get update (no candidate for Debian's prometheus package yet)"
    apt-get update -qq >&2
    version=$(apt-cache policy prometheus | awk '/Candidate:/ {print $2}')
  fi
  [ -n "$version" ] && [ "$version" != "(none)" ] || {
    echo "error: Debian offers no 'prometheus' package here (apt-cache policy prometheus)" >&2; exit 1; }
  local dir="$out/promtool-deb-$(echo "$version" | tr -c 'a-zA-Z0-9._\n-' '_')"
  step "fetching promtool from Debian's prometheus $version (apt-get download, unpacked; nothing installed)"
  local start=$SECONDS tmp; tmp=$(mktemp -d); chmod 755 "$tmp"
  (cd "$tmp" && apt-get download -q "prometheus=$version" >&2 2>/dev/null) \
    || (cd "$tmp" && apt-get download "prometheus=$version" >&2)
  dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/root"
  mkdir -p "$dir"
  cp "$tmp/root/usr/bin/promtool" "$dir/promtool.tmp"
  mv "$dir/promtool.tmp" "$dir/promtool"
  rm -rf "$tmp"
  "$dir/promtool" --version >&2
  step "promtool ready in $((SECONDS - start))s"
  echo "$dir/promtool"
}

build_prometheus() {
  [ -x "$prom_dir/prometheus" ] && return
  step "building Prometheus $prom_version from its Go module with only the Kubernetes SD (cold: several minutes on 2 cores)"
  local start=$SECONDS
  go_build "$here/prometheus" "$prom_dir/prometheus" -tags remove_all_sd,enable_kubernetes_sd \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$prom_version -X github.com/prometheus/common/version.Branch=module-$prom_module" \
    github.com/prometheus/prometheus/cmd/prometheus
  step "prometheus built in $((SECONDS - start))s"
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
  [ -x "$schema_dir/dashboard-schema" ] && return
  step "building the dashboard checker (Grafana Foundation SDK, Apache-2.0)"
  local start=$SECONDS
  go_build "$here/dashboard-schema" "$schema_dir/dashboard-schema" .
  step "dashboard checker built in $((SECONDS - start))s"
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
