#!/usr/bin/env bash
# Builds the shardns container image (`make image`): one static binary on an
# empty base. FROM scratch pulls nothing, so this works on machines that
# reach no registry; the image holds no shell, no libc and no CA roots (the
# apiserver's CA comes with the pod's service account mount).
#
#   VERSION  image tag and the version the binary reports (default: dev)
#   IMAGE    image name (default: shardns); tagged $IMAGE:$VERSION and
#            $IMAGE:latest, the tag deploy/ uses
#   GOARCH   target architecture (default: the build machine's)
set -euo pipefail

cd "$(dirname "$0")/.."
VERSION="${VERSION:-dev}"
IMAGE="${IMAGE:-shardns}"
GO="${GO:-go}"
arch="${GOARCH:-$($GO env GOARCH)}"

# The build context holds only the binary and the Dockerfile: nothing of the
# repository is sent to the daemon, and nothing is left in the tree.
ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT

CGO_ENABLED=0 GOOS=linux GOARCH="$arch" $GO build -trimpath \
  -ldflags "-s -w -X github.com/shardns/shardns/node.Version=$VERSION" \
  -o "$ctx/shardns" ./cmd/shardns

# 65532 is the conventional "nonroot" uid/gid of distroless images; numeric,
# because scratch has no /etc/passwd and runAsNonRoot can only verify a
# numeric user. Binding :53 needs NET_BIND_SERVICE, granted by the pod spec.
cat >"$ctx/Dockerfile" <<EOF
FROM scratch
COPY shardns /shardns
USER 65532:65532
EXPOSE 53/udp 53/tcp 8080/tcp 7946/tcp 7946/udp 8090/tcp
LABEL org.opencontainers.image.title="shardns" \\
      org.opencontainers.image.description="Sharded cluster DNS server for Kubernetes" \\
      org.opencontainers.image.source="https://github.com/shardns/shardns" \\
      org.opencontainers.image.version="$VERSION"
ENTRYPOINT ["/shardns", "serve", "--config", "/etc/shardns/shardns.yaml"]
EOF

docker build --platform "linux/$arch" -t "$IMAGE:$VERSION" -t "$IMAGE:latest" "$ctx"
echo "built $IMAGE:$VERSION (also tagged $IMAGE:latest)"
