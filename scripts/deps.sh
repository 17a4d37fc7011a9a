#!/usr/bin/env bash
# Installs the Debian packages the test tiers use, when they are missing:
# dig and dnsperf (clients), etcd (for the real kube-apiserver),
# unbound (a real upstream resolver), kdig (DNS over TLS and HTTPS) and
# ip (TestStrangersCannotJoin gives its processes addresses of their own).
set -euo pipefail

need=()
command -v dig >/dev/null || need+=(dnsutils)
command -v dnsperf >/dev/null || need+=(dnsperf)
command -v etcd >/dev/null || need+=(etcd-server)
command -v unbound >/dev/null || need+=(unbound)
command -v kdig >/dev/null || need+=(knot-dnsutils)
command -v ip >/dev/null || need+=(iproute2)

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "installing ${need[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
