#!/bin/sh
# Installs what Astral needs on Debian 12 (only the packages that are missing).
# Runs apt through sudo when not root. Safe to run again.
set -eu
packages="build-essential cmake ninja-build pkg-config libhwloc-dev hwloc-nox libfmt-dev catch2
dpkg-dev nlohmann-json3-dev libcli11-dev libcurl4-openssl-dev libssl-dev libibverbs-dev
ibverbs-utils libbenchmark-dev python3 curl ca-certificates openssl iproute2 procps clang
libclang-rt-14-dev libsystemd-dev systemd-journal-remote rsyslog prometheus # promtool
(Debian's package): the facility suite checks and unit-tests alert rules. packages="$packages"
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "install-deps: installing:$missing" >&2
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
fi
