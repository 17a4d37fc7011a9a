#!/usr/bin/env bash
# Builds the kube-apiserver of the integration tier (integration/kubeapi)
# once, from the Go module proxy, into a cache folder outside the repo, and
# prints its path. The version is the one integration/apiserver/go.mod pins;
# the node tier runs an older one of its own (build-node.sh). Later runs
# reuse the binary (and Go's build cache makes a rebuild take seconds).
set -euo pipefail

version=v1.37.2
here="$(cd "$(dirname "$0")/.." && pwd)"
cache="${SHARDNS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shardns}"
bin="$cache/bin/kube-apiserver-$version"

if [ ! -x "$bin" ]; then
  mkdir -p "$cache/bin"
  echo "building kube-apiserver $version into $cache (a few minutes the first time)" >&2
  (cd "$here/apiserver" && CGO_ENABLED=0 go build -trimpath -o "$bin.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
  mv "$bin.tmp" "$bin"
fi
echo "$bin"
