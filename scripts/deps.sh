#!/usr/bin/env bash
# Installs the Debian packages the test tiers use, when they are missing:
# dig and dnsperf (clients), etcd (for the real kube-apiserver) and
# etcdctl (TestRelistSkipsMalformed writes objects the API refuses),
# unbound (a real upstream resolver), kdig (DNS over TLS and HTTPS), knotd
# (TestStaticZonePerf serves its zone with Knot DNS beside shardns), ip
# (TestStrangersCannotJoin gives its processes addresses of their own),
# nft (TestPartition cuts a replica off in its network namespace), and
# what the node tier (integration/kubenode) runs pods with: containerd and
# runc, the CNI plugins, conntrack (kube-proxy clears UDP entries with it)
# and a static busybox (copied into the pods' busybox image); prometheus
# and promtool (the dashboard's and alerts' expressions are checked against
# scraped replicas) and chromium (the ring page is loaded in a real browser).
set -euo pipefail

need=()
command -v dig >/dev/null || need+=(dnsutils)
command -v dnsperf >/dev/null || need+=(dnsperf)
command -v etcd >/dev/null || need+=(etcd-server)
command -v etcdctl >/dev/null || need+=(etcd-client)
command -v unbound >/dev/null || need+=(unbound)
command -v kdig >/dev/null || need+=(knot-dnsutils)
command -v knotd >/dev/null || [ -x /usr/sbin/knotd ] || need+=(knot)
command -v ip >/dev/null || need+=(iproute2)
command -v nft >/dev/null || need+=(nftables)
# A containerd already installed (Docker's containerd.io, which also brings
# runc) is used as it is: Debian's package would replace it.
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v conntrack >/dev/null || need+=(conntrack)
dpkg-query -W -f '${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || need+=(busybox-static)
command -v prometheus >/dev/null || need+=(prometheus)
command -v chromium >/dev/null || need+=(chromium)

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "installing ${need[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
