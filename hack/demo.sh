#!/usr/bin/env bash
# `make demo`: the lab's ramp against a simulated provider, showing where each way of calling a
# provider breaks. The lab is not built yet; until it is, this prints what the demo will run and
# runs nothing, so no result is shown that was not measured.
set -euo pipefail
cat <<'PLAN'
Sluice demo: not available yet. The lab (cmd/lab) that it runs has not been built.

When it is, `make demo` will, on loopback only:
  1. start a simulated provider: 1,500 requests/min, 300,000 tokens/min, 200 calls in flight,
     $3 per million tokens, about 2 s per call;
  2. add users every 3 s (1, 2, 3, 5, 8, 12, 20, 30, 50, 80), each uploading a 100-page book;
  3. run five ways of calling the provider: one page at a time; all pages at once; the gateway
     with Reject; the gateway with Queue; an HTTP client pool of 200 connections;
  4. report for each where it first breaks, pages lost or refused, whole books, wasted spend
     and latency.
PLAN
