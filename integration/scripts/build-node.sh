#!/usr/bin/env bash
# Builds the Kubernetes binaries of the node tier (integration/kubenode)
# once, from the Go module proxy, into a cache folder outside the repo (the
# one build-apiserver.sh uses), and prints that folder. The version is the
# one integration/nodebin/go.mod pins, its own module because the node tier
# stays on a Kubernetes whose kubelet works on this host while the
# integration tier's kube-apiserver (integration/apiserver, built by
# build-apiserver.sh) is newer. Later runs reuse the binaries; a rebuild
# with Go's build cache warm takes seconds.
#
# The node tier's whole control plane comes from here, kube-apiserver
# included, so that every component is of one version: kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet and kube-proxy, built by
# one `go build`, so the packages they share are compiled once and the
# links run in parallel. Each binary is named after its version, so this
# kube-apiserver and build-apiserver.sh's share the folder.
set -euo pipefail

version=v1.31.4
here="$(cd "$(dirname "$0")/.." && pwd)"
cache="${SHARDNS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shardns}"
cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)

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
  (cd "$here/nodebin" && CGO_ENABLED=0 go build -trimpath -o "$out/" "${missing[@]}")
  for p in "${missing[@]}"; do
    mv "$out/${p##*/}" "$cache/bin/${p##*/}-$version"
  done
  echo "built in $((SECONDS - start))s" >&2
fi
echo "$cache/bin"
