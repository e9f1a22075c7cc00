#!/usr/bin/env bash
# `make lab-overhead`: what the gateway adds to a call. The same requests go, open-loop, straight to
# a zero-delay stub, through a bare reverse proxy and through the gateway, at 500 and 2,000 a
# second, three rounds of 10 s each; then through the same gateway tracing 1% and 100% of its calls
# to an OTLP receiver. The checks are made on the gateway that traces nothing. The table goes to
# $OUT/overhead.txt, headed by the command, the date and the cores, and the JSON report to
# $OUT/overhead.json.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/bin/lab-overhead}

echo "lab-overhead: building the gateway and the lab" >&2
go build -o bin/ ./cmd/gateway ./cmd/lab
mkdir -p "$out"
flags=(-gateway bin/gateway -tracing 0.01,1)
{
	echo "# make lab-overhead on $(date -u +%F), $(nproc) cores; the figures vary from run to run"
	echo "## bin/lab overhead ${flags[*]}"
	bin/lab overhead "${flags[@]}" -out "$out/overhead.json" 2>"$out/overhead.log"
} | tee "$out/overhead.txt"
