#!/usr/bin/env bash
# Installs the Debian packages the test tiers use, when they are missing.
set -euo pipefail

need=()
command -v dig >/dev/null || need+=(dnsutils)
command -v dnsperf >/dev/null || need+=(dnsperf)

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "installing ${need[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
