#!/usr/bin/env bash
# Makes sure redis-server is on PATH for the tests, which start private servers of their own.
# As root it installs Debian's package; otherwise it says what to install.
set -euo pipefail

if command -v redis-server >/dev/null; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "hack: redis-server is missing; install it (Debian: sudo apt-get install redis-server) and run again" >&2
  exit 1
fi
echo "hack: installing redis-server with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
# policy-rc.d keeps the package from starting a system-wide server on port 6379: tests start their own.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod +x "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt-get install -y -qq --no-install-recommends redis-server >&2
command -v redis-server >/dev/null
