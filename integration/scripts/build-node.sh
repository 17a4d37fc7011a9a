#!/usr/bin/env bash
# Builds the Kubernetes binaries of the node tier (integration/kubenode)
# once, from the Go module proxy, into the cache folder where
# build-apiserver.sh puts kube-apiserver, and prints that folder. The
# versions are the ones integration/apiserver/go.mod pins (one module for
# every Kubernetes binary of the tests). Later runs reuse the binaries; a
# rebuild with Go's build cache warm takes seconds.
#
# kube-apiserver itself comes from build-apiserver.sh (the node tier calls
# both); this script adds kube-controller-manager, kube-scheduler, kubelet
# and kube-proxy, built by one `go build`, so the packages they share are
# compiled once and the links run in parallel.
set -euo pipefail

version=v1.31.4
here="$(cd "$(dirname "$0")/.." && pwd)"
cache="${SHARDNS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shardns}"
cmds=(kube-controller-manager kube-scheduler kubelet kube-proxy)

missing=()
for c in "${cmds[@]}"; do
  [ -x "$cache/bin/$c-$version" ] || missing+=("k8s.io/kubernetes/cmd/$c")
done
if [ ${#missing[@]} -gt 0 ]; then
  mkdir -p "$cache/bin"
  out="$(mktemp -d "$cache/bin/.build-node.XXXXXX")"
  trap 'rm -rf "$out"' EXIT
  echo "building ${missing[*]##*/} $version into $cache (several minutes the first time)" >&2
  start=$SECONDS
  (cd "$here/apiserver" && CGO_ENABLED=0 go build -trimpath -o "$out/" "${missing[@]}")
  for p in "${missing[@]}"; do
    mv "$out/${p##*/}" "$cache/bin/${p##*/}-$version"
  done
  echo "built in $((SECONDS - start))s" >&2
fi
echo "$cache/bin"
