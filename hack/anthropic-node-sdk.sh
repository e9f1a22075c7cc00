#!/usr/bin/env bash
# Installs the official @anthropic-ai/sdk npm package, at a pinned version, under
# bin/anthropic-node-sdk once, for the end-to-end test of Anthropic's Node SDK through the
# gateway, and prints the directory of its node_modules. Needs node and npm.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${ANTHROPIC_NODE_VERSION:-1.17.0}
out=$root/bin/anthropic-node-sdk/$version
if [ ! -f "$out/node_modules/@anthropic-ai/sdk/package.json" ]; then
	mkdir -p "$out"
	npm install --prefix "$out" --no-audit --no-fund --no-save --loglevel=error "@anthropic-ai/sdk@$version" >&2
fi
echo "$out/node_modules"
