#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kubectl and etcd from the Go module proxy
# into bin/k8s/<version>/ and prints that directory. A second run reuses what is there.
#
# Kubernetes' own module replaces every k8s.io/* staging module with a local path, so it cannot be
# built with `go install`; a throwaway module pins each staging module to its published release.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${CONTROL_PLANE_DIR:-$root/bin/k8s/$K8S_VERSION}

missing() {
  local b
  for b in kube-apiserver kube-controller-manager kubectl etcd; do
    [ -x "$out/$b" ] || return 0
  done
  return 1
}

if ! missing; then
  echo "$out"
  exit 0
fi

mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
staging_version=v0${K8S_VERSION#v1}

echo "hack: building the control plane $K8S_VERSION and etcd $ETCD_VERSION into $out (10 to 30 minutes cold; later runs reuse it)" >&2

# progress reads `go build -v` (a package path a line) and says every 250 packages how far it is;
# any other line, such as a compiler error, passes through.
progress() {
  awk -v what="$1" '/ / { print; next } { n++ } n % 250 == 0 { printf "hack: %s: %d packages compiled\n", what, n; fflush() }' >&2
}

# The Kubernetes binaries.
mkdir -p "$work/k8s"
cd "$work/k8s"
kmod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
{
  echo "module sluice.dev/k8sbins"
  echo "go 1.26"
  echo "require k8s.io/kubernetes $K8S_VERSION"
  echo "replace ("
  sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/k8s.io/.*#  \1 => \1 '"$staging_version"'#p' "$kmod"
  echo ")"
} >go.mod
cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
echo "hack: [1/4] downloading Kubernetes' modules" >&2
GOFLAGS=-mod=mod go mod tidy >&2
echo "hack: [2/4] compiling kube-apiserver, kube-controller-manager and kubectl (the longest step)" >&2
GOFLAGS=-mod=mod go build -v -o "$out/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kubectl 2>&1 | progress kubernetes

# etcd.
mkdir -p "$work/etcd"
cd "$work/etcd"
cat >go.mod <<MOD
module sluice.dev/etcdbin
go 1.26
require go.etcd.io/etcd/server/v3 $ETCD_VERSION
MOD
cat >tools.go <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
echo "hack: [3/4] downloading etcd's modules" >&2
GOFLAGS=-mod=mod go mod tidy >&2
echo "hack: [4/4] compiling etcd" >&2
GOFLAGS=-mod=mod go build -v -o "$out/etcd" go.etcd.io/etcd/server/v3 2>&1 | progress etcd
echo "hack: the control plane is built" >&2

echo "$out"
