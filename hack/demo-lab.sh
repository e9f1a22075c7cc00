#!/usr/bin/env bash
# `make demo-lab`: the lab's ramp against a simulated provider, showing where each way of calling a
# provider breaks. Everything runs on loopback and stops by itself; each case is capped at
# DEMO_DURATION (60s by default), but the queue case, which runs until its books are done (at most
# 10 minutes). The gateway cases run two gateways sharing a redis-server, as behind a Service. The
# table goes to stdout and, headed by the command, the date and the cores and followed by the time
# the run took, to $DEMO_OUT/table.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${DEMO_OUT:-$root/bin/demo}

hack/ensure-redis.sh
echo "demo: building the gateway and the lab" >&2
go build -o bin/ ./cmd/gateway ./cmd/lab

cat >&2 <<'PLAN'
demo: a simulated provider (1,500 requests/min, 300,000 tokens/min, 200 calls in flight,
      $3 per million tokens, about 2 s a call); users join every 3 s (1, 2, 3, 5, 8, 12, 20,
      30, 50, 80), each uploading a 20-page book, one call a page. Five ways of calling it:
      sequential, burst (all at once), reject (two gateways with Reject), queue (two gateways
      with Queue, door at 60 s, pages turned away come back at most 3 times; it runs until its
      books are done) and pool (200 connections, clients that retry). Then the interactive
      case: a tenant at 5 calls a second beside a batch tenant sending twice what the provider
      serves, through the two gateways.
PLAN
mkdir -p "$out"
duration=${DEMO_DURATION:-60s}
{
	echo "# make demo-lab (DEMO_DURATION=$duration) on $(date -u +%F), $(nproc) cores; the figures vary from run to run"
	bin/lab ramp -gateway bin/gateway -gateways 2 -pages 20 -comebacks 3 -duration "$duration" -out "$out"
	echo "# the run took $((SECONDS / 60)) min $((SECONDS % 60)) s, the build included"
} | tee "$out/table.txt"
echo >&2
echo "demo: the table is $out/table.txt, the report $out/report.json, the charts $out/*.png" >&2
