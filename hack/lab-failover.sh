#!/usr/bin/env bash
# `make lab-failover`: the failover case. Two gateways sharing a redis-server queue a crowd's books
# (users on the lab's ramp up to 80, 20-page books, clients that come back when told, at most 3
# times) for a model served by a pool: the lab's reference account and a second with a tenth of
# its limits. The first account goes down, its listener and connections closed as a killed
# process's, 30 s into the case, for 30 s. The goals: no provider 429s, no page lost to the
# outage, every book whole. The table goes to $OUT/failover.txt, headed by the date and the cores,
# and the chart to $OUT/failover/failover.png.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/bin/lab-failover}

hack/ensure-redis.sh
echo "lab-failover: building the gateway and the lab" >&2
go build -o bin/ ./cmd/gateway ./cmd/lab
mkdir -p "$out"
flags=(-cases failover -gateway bin/gateway -gateways 2 -pages 20 -comebacks 3 -failover-at 30s -failover-for 30s)
{
	echo "# make lab-failover on $(date -u +%F), $(nproc) cores; the figures vary from run to run"
	echo "## bin/lab ramp ${flags[*]}"
	bin/lab ramp "${flags[@]}" -out "$out/failover" 2>"$out/failover.log"
} | tee "$out/failover.txt"
