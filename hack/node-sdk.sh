#!/usr/bin/env bash
# Installs the official openai npm package, at a pinned version, under bin/node-sdk once, for the
# end-to-end test of the Node SDK through the gateway, and prints the directory of its
# node_modules. Needs node and npm.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${OPENAI_NODE_VERSION:-6.49.0}
out=$root/bin/node-sdk/$version
if [ ! -f "$out/node_modules/openai/package.json" ]; then
	mkdir -p "$out"
	npm install --prefix "$out" --no-audit --no-fund --no-save --loglevel=error "openai@$version" >&2
fi
echo "$out/node_modules"
