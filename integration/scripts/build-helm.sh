#!/usr/bin/env bash
# Builds the helm CLI that the chart tests use (deploy/helm/shardns) once,
# from the Go module proxy, into the cache folder build-apiserver.sh uses,
# and prints its path. Later runs reuse the binary.
set -euo pipefail

version=v4.3.2
cache="${SHARDNS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shardns}"
bin="$cache/bin/helm-$version"

if [ ! -x "$bin" ]; then
  mkdir -p "$cache/bin"
  echo "building helm $version into $cache (a minute or two the first time)" >&2
  tmp="$(mktemp -d "$cache/bin/helm-build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  # go install with a version builds outside any module, as the release
  # does, pinned by helm's own go.mod and go.sum.
  GOBIN="$tmp" CGO_ENABLED=0 GOFLAGS=-trimpath go install "helm.sh/helm/v4/cmd/helm@$version"
  mv "$tmp/helm" "$bin"
fi
echo "$bin"
