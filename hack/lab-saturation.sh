#!/usr/bin/env bash
# `make lab-saturation`: the gateway at saturation against a bare proxy, every shape of call. Each
# target alone on one core, on a closed loop of 64 connections, and open-loop: the short chats at
# 2,000 calls a second, the stream of 200 chunks, the 64 embeddings and the 40,000-token prompt at
# 100 (on two cores the stub and the load cannot send them faster); the gateway with its limits in
# memory and in a redis-server of the run's own; three rounds of 5 s. The tables go to
# $OUT/saturation.txt, headed by the command, the date, the cores and the load average, and the
# JSON reports to $OUT/saturation-*.json.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/bin/lab-saturation}

echo "lab-saturation: building the gateway and the lab" >&2
go build -o bin/ ./cmd/gateway ./cmd/lab
mkdir -p "$out"
common=(-gateway bin/gateway -connections 64 -stores memory,redis -step 5s -rounds 3 -warmup 2s)
run() {
	local name=$1
	shift
	echo "## bin/lab overhead ${common[*]} $*"
	bin/lab overhead "${common[@]}" "$@" -out "$out/saturation-$name.json" 2>"$out/saturation-$name.log"
}
{
	echo "# make lab-saturation on $(date -u +%F), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); the figures vary from run to run"
	run chats -shapes chat,chat-uncapped -rates 2000
	run long -shapes stream,embeddings,long-prompt -rates 100
} | tee "$out/saturation.txt"
