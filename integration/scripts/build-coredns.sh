#!/usr/bin/env bash
# Builds CoreDNS once, from the Go module proxy, into the same cache folder
# as the kube-apiserver, and prints its path. `make bench` runs it beside
# shardns on the same cluster. The version is the one integration/coredns's
# go.mod requires; later runs reuse the binary.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
version="$(cd "$here/coredns" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' github.com/coredns/coredns)"
cache="${SHARDNS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shardns}"
bin="$cache/bin/coredns-$version"

if [ ! -x "$bin" ]; then
  mkdir -p "$cache/bin"
  echo "building coredns $version into $cache (a few minutes the first time)" >&2
  (cd "$here/coredns" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "$bin.tmp" .)
  mv "$bin.tmp" "$bin"
fi
echo "$bin"
