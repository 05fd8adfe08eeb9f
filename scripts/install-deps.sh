#!/bin/sh
# Installs what Astral needs on Debian 12 (only the packages that are missing).
# Runs apt through sudo when not root. Safe to run again.
set -eu
packages="build-essential cmake ninja-build pkg-config libhwloc-dev hwloc-nox libfmt-dev catch2
nlohmann-json3-dev libcli11-dev libcurl4-openssl-dev libssl-dev libibverbs-dev libbenchmark-dev
python3 curl ca-certificates openssl iproute2 procps"
# dpkg-dev: the package test (cpack's dpkg-shlibdeps, dpkg -x).
packages="$packages dpkg-dev"
# ibverbs-utils: Debian's ibv_devinfo and ibv_rc_pingpong run against the software HCA.
packages="$packages ibverbs-utils"
# clang and libFuzzer: the clang and fuzz presets.
packages="$packages clang libclang-rt-14-dev"
# journal files (sd-journal), and the real collectors the monitor's source tests run.
packages="$packages libsystemd-dev systemd-journal-remote rsyslog"
# rsyslog-relp (imrelp/omrelp): the monitor's test of switch syslog forwarded over RELP.
packages="$packages rsyslog-relp"
# prometheus and promtool: the monitor's metric source tests and the facility rule tests.
packages="$packages prometheus"
# libmicrohttpd: the facility exporter's, push listener's and mockup's HTTP(S) server.
packages="$packages libmicrohttpd-dev"
# simdjson: the Redfish poller's JSON parser (12,500 BMCs a poll).
packages="$packages libsimdjson-dev"
# jemalloc: the astral CLI's allocator (the site-scale Redfish poll; CMakeLists.txt says why).
packages="$packages libjemalloc-dev"
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
