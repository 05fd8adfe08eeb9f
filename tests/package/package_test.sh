#!/bin/sh
# The Debian package, as a site gets it: cpack builds it from this build tree, dpkg -x unpacks it
# into a scratch root (no root, no dpkg database touched), and the plugin is loaded from there by
# name, the way NCCL resolves NCCL_NET_PLUGIN=astral, by the C plugin probe; the unpacked CLI runs
# and drives the unpacked plugin through netbench on loopback.
#   package_test.sh BUILD_DIR PLUGIN_PROBE
set -eu
build=$1
probe=$2
scratch=$(mktemp -d "${TMPDIR:-/tmp}/astral-package-test.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
trap 'exit 1' INT TERM

fail() {
  echo "package test: $*" >&2
  exit 1
}

# 1. Build the package (cpack runs the install rules into its own staging directory).
cpack --config "$build/CPackConfig.cmake" -B "$scratch/out" >"$scratch/cpack.log" 2>&1 ||
  { cat "$scratch/cpack.log" >&2; fail "cpack failed"; }
set -- "$scratch"/out/astral_*.deb
[ -f "$1" ] || fail "cpack made no astral_*.deb (see above)"
deb=$1
echo "built $(basename "$deb") ($(wc -c <"$deb") bytes)"

# 2. The control file: name, declared runtime dependencies, libibverbs only recommended.
dpkg-deb --field "$deb" Package Depends Recommends Section Maintainer >"$scratch/control"
cat "$scratch/control"
grep -qx 'Package: astral' "$scratch/control" || fail "package name is not astral"
grep -q '^Depends:.*libc6' "$scratch/control" || fail "Depends lacks libc6"
grep -q '^Depends:.*libhwloc15' "$scratch/control" || fail "Depends lacks libhwloc15"
grep -q '^Depends:.*libibverbs' "$scratch/control" && fail "libibverbs must not be a Depends"
grep -q '^Recommends:.*libibverbs1' "$scratch/control" || fail "Recommends lacks libibverbs1"

dpkg-deb --control "$deb" "$scratch/control.d"
for script in postinst prerm postrm; do
  sh -n "$scratch/control.d/$script" || fail "maintainer script $script does not parse"
done
grep -qx 'activate-noawait ldconfig' "$scratch/control.d/triggers" || fail "no ldconfig trigger"

# 3. Unpack into a scratch root, as a container image build or a node image would.
dpkg -x "$deb" "$scratch/root"
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
libdir=$scratch/root/usr/lib/$multiarch
plugin=$libdir/libnccl-net-astral.so
cli=$scratch/root/usr/bin/astral
for f in "$plugin" "$cli" "$scratch/root/usr/lib/systemd/system/astral-facility.service" \
  "$scratch/root/usr/lib/sysusers.d/astral.conf" "$scratch/root/usr/share/doc/astral/copyright" \
  "$scratch/root/usr/share/doc/astral/changelog.gz" "$scratch/root/usr/share/doc/astral/README.md"; do
  [ -f "$f" ] || fail "the package lacks ${f#"$scratch/root"}"
done
for elf in "$plugin" "$cli"; do
  if readelf -d "$elf" | grep -E '\((RPATH|RUNPATH)\)'; then
    fail "${elf#"$scratch/root"} carries an RPATH"
  fi
done

# 4. Load the plugin by name as NCCL does for NCCL_NET_PLUGIN=astral: first the value as given,
#    then libnccl-net-<value>.so, each through dlopen's search (here LD_LIBRARY_PATH, on a node
#    the multiarch directory itself). LD_DEBUG names the file the loader really opened.
export NCCL_NET_PLUGIN=astral
if LD_LIBRARY_PATH=$libdir "$probe" load "$NCCL_NET_PLUGIN" >/dev/null 2>&1; then
  fail "a library named plain '$NCCL_NET_PLUGIN' was found; expected only libnccl-net-astral.so"
fi
name=libnccl-net-$NCCL_NET_PLUGIN.so
LD_DEBUG=files LD_DEBUG_OUTPUT=$scratch/ld LD_LIBRARY_PATH=$libdir "$probe" load "$name" \
  >"$scratch/probe.out" 2>&1 || { cat "$scratch/probe.out" >&2; fail "the probe could not load $name"; }
cat "$scratch/probe.out"
grep -q 'v11=Astral' "$scratch/probe.out" || fail "the probe did not resolve ncclNetPlugin_v11"
grep -h "file=$libdir/$name " "$scratch"/ld.* >/dev/null ||
  { grep -h "$name" "$scratch"/ld.* >&2 || true; fail "the loader did not open $name from the unpacked root"; }
echo "loaded $name from ${libdir#"$scratch/root"} by name"

# 5. The unpacked CLI: help, the unit's command line, and netbench over the unpacked plugin
#    (by name again, through LD_LIBRARY_PATH) on loopback only, data verified on both ranks.
"$cli" --help >"$scratch/help" || fail "astral --help exited $?"
grep -q 'facility' "$scratch/help" || fail "astral --help lists no facility command"
exec_start=$(sed -n 's/^ExecStart=//p' "$scratch/root/usr/lib/systemd/system/astral-facility.service")
case $exec_start in
  "/usr/bin/astral facility serve --config /etc/astral/sources.json"*) ;;
  *) fail "unexpected ExecStart in the unit: $exec_start" ;;
esac
# The service's user, as the postinst creates it (systemd-sysusers, here into the scratch root).
if command -v systemd-sysusers >/dev/null 2>&1; then
  mkdir -p "$scratch/root/etc"
  systemd-sysusers --root="$scratch/root" astral.conf >/dev/null 2>&1 || fail "systemd-sysusers rejected astral.conf"
  grep -q '^astral:x:[0-9]*:[0-9]*:.*:/var/lib/astral:' "$scratch/root/etc/passwd" ||
    fail "systemd-sysusers made no astral user from astral.conf"
else
  echo "systemd-sysusers not installed: the service user's sysusers.d entry is not checked"
fi
status=0
"$cli" facility serve --config "$scratch/no-such-sources.json" --once >/dev/null 2>"$scratch/serve.err" || status=$?
[ "$status" -eq 2 ] && grep -q 'no-such-sources.json' "$scratch/serve.err" ||
  { cat "$scratch/serve.err" >&2; fail "the unit's serve command line: exit $status (expected 2 naming the config)"; }
# No --plugin: the installed CLI finds the plugin by its bare name on the loader path.
ASTRAL_SOCKET_IFNAME='=lo' LD_LIBRARY_PATH=$libdir "$cli" netbench --ranks 2 \
  --pattern pingpong --size 8,64K --iters 5 --warmup 1 --timeout 60 >"$scratch/netbench" 2>&1 ||
  { cat "$scratch/netbench" >&2; fail "netbench over the unpacked plugin failed"; }
cat "$scratch/netbench"
echo "package test: ok"
