// Helper module: the dashboard checker of tests/monitoring/build.sh, built on
// the Grafana Foundation SDK (Apache-2.0), never on Grafana itself (AGPL).
module gpuready.local/monitoring/dashboard-schema

go 1.26.0

require github.com/grafana/grafana-foundation-sdk/go v0.0.22
