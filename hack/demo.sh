#!/usr/bin/env bash
# `make demo`: Sluice's whole story on one machine, on loopback. It builds what it needs (the
# control plane on the first run, with progress), installs Redis if missing, then starts etcd,
# kube-apiserver, kube-controller-manager, Redis, the lab's simulators, the manager, two gateways
# and the metrics adapter; applies the CRDs and samples; runs the lab's queue case through the
# gateways; shows a hosted account's lower limits learned, and an Anthropic account's learned and kept; sends the self-hosted model calls through
# the gateways until its HPA scales it on their queue; shows the quotas' live usage; and
# stops everything it started. DEMO_SHORT=1 runs a shorter ramp and load.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

assets=$(hack/build-control-plane.sh)
hack/ensure-redis.sh
echo "demo: building the gateway, the lab, the manager and the metrics adapter" >&2
go build -o bin/ ./cmd/gateway ./cmd/lab ./cmd/manager ./cmd/metrics-adapter
KUBEBUILDER_ASSETS=$assets go run ./test/demo -bin bin -out "${DEMO_OUT:-$root/bin/demo}"
