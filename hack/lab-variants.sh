#!/usr/bin/env bash
# `make lab-variants`: the queue case (two gateways sharing a redis-server, 80 users on the ramp,
# 20-page books, clients that come back at most 3 times) in crowds unlike the lab's own: prompts
# that the gateway's encoding counts more or less densely than the provider's four bytes a token,
# pages of spread sizes and max_tokens, a provider that answers fast or with a wide spread, and
# clients pinned to one gateway or spread over both; then the interactive case with dense text.
# Then crowds of agents, each user's calls sent at once: 40 users, half of them sending
# transcripts of code-like text of 6,000 tokens (8-page books) or of 20,000 (4-page books) and
# half short pages; the lab's own crowd of 80 users and 20 pages of 800 prompt tokens through ten
# gateways; 40 users of short pages with three calls near the provider's whole minute; and the lab's
# crowd with 4-page books at a provider that takes 8 calls at once, each of about 4 s, which hold
# it back long before its tokens a minute do.
# The goals in each: the crowd done within 1.1 times the provider's bound (the tokens it served
# over its tokens a minute, or the time its calls took over the calls it takes at once, whichever
# is longer) plus the ramp's own length, at least 95% of the provider's tokens a
# minute while pages queue, no provider 429s, at most 1.5 refusals a page, Jain's index over users
# at least 0.9, every book whole. Two variants run at a time; each table goes to
# $OUT/<variant>.txt, then all, headed by the date and the cores, to stdout and $OUT/variants.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/bin/lab-variants}

hack/ensure-redis.sh
echo "lab-variants: building the gateway and the lab" >&2
go build -o bin/ ./cmd/gateway ./cmd/lab
mkdir -p "$out"

common=(-gateway bin/gateway -gateways 2 -pages 20 -comebacks 3)
# agents is a crowd of 40 users on the lab's ramp, every other one sending code-like transcripts.
agents="-users 1,2,3,5,8,12,20,30,40 -text code"
variants=(
	"dense-pinned|-cases queue -text dense -prompt-tokens 805 -max-tokens 50 -latency 2s -latency-stddev 600ms"
	"dense-spread-fast|-cases queue -text dense -prompt-tokens 805 -max-tokens 50 -latency 200ms -latency-stddev 100ms -spread-pages"
	"sparse-sizes-pinned|-cases queue -text sparse -size-spread 0.8 -latency 2s -latency-stddev 1s"
	"filler-sizes-spread|-cases queue -size-spread 0.8 -max-tokens 400 -prompt-tokens 400 -spread-pages"
	"dense-interactive|-cases interactive -text dense -prompt-tokens 805 -max-tokens 50 -gateways 1 -duration 90s"
	"ten-gateways|-cases queue -gateways 10 -prompt-tokens 800 -max-tokens 50 -queue-cap 15m"
	"transcripts-6k|-cases queue $agents -pages 8 -long-prompt-tokens 6000"
	"transcripts-20k|-cases queue $agents -pages 4 -long-prompt-tokens 20000 -queue-cap 15m"
	"huge-calls|-cases queue -users 1,2,3,5,8,12,20,30,40 -pages 8 -huge-pages 3 -huge-prompt-tokens 280000"
	"calls-in-flight|-cases queue -pages 4 -max-in-flight 8 -latency 4s -queue-cap 10m"
)
run() {
	local name=${1%%|*} flags=${1#*|}
	# shellcheck disable=SC2086 # flags are words
	bin/lab ramp "${common[@]}" $flags -out "$out/$name" >"$out/$name.txt" 2>"$out/$name.log"
	echo "lab-variants: $name done" >&2
}
for ((i = 0; i < ${#variants[@]}; i += 2)); do
	pids=()
	run "${variants[i]}" &
	pids+=($!)
	if ((i + 1 < ${#variants[@]})); then
		run "${variants[i + 1]}" &
		pids+=($!)
	fi
	for pid in "${pids[@]}"; do
		wait "$pid" # a variant that failed stops the script, as set -e would
	done
done
{
	echo "# make lab-variants on $(date -u +%F), $(nproc) cores; the figures vary from run to run"
	for v in "${variants[@]}"; do
		echo "## ${v%%|*}: ${v#*|}"
		cat "$out/${v%%|*}.txt"
		echo
	done
} | tee "$out/variants.txt"
