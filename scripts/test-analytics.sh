#!/usr/bin/env bash
# The GStreamer element's `analytics` feature (GstAnalyticsRelationMeta), built and tested
# against a GStreamer that has the analytics library (>= 1.24). Debian 12 ships 1.22, so this
# makes a Debian 13 root (GStreamer 1.26) with debootstrap from Debian's archive, installs the
# build and GStreamer packages in it, and runs there, with this machine's Rust toolchain
# (bind-mounted, read-only), the element's tests with `--features analytics`
# (tests/analytics.rs among them). Its lints are scripts/test.sh's: clippy type-checks the
# feature there, every target, against the same bindings. The root is kept in
# target/trixie-root and its build in target/trixie, so a second run only rebuilds what changed.
# Needs root (debootstrap, chroot, bind mounts); .ci/run calls it. Where GStreamer on this
# machine already has the analytics library, scripts/test.sh runs the same tests directly.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ "$(id -u)" != 0 ]; then
  echo "test-analytics: needs root (debootstrap, chroot and bind mounts)" >&2; exit 1
fi
cargo_home=${CARGO_HOME:-$HOME/.cargo}
rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
[ -x "$cargo_home/bin/cargo" ] || { echo "test-analytics: no cargo in $cargo_home/bin (run scripts/setup.sh)" >&2; exit 1; }
command -v debootstrap >/dev/null 2>&1 || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap; }
chr="$root/target/trixie-root"
pkgs="pkg-config build-essential ca-certificates libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev
  libgstreamer-plugins-bad1.0-dev gstreamer1.0-plugins-base gstreamer1.0-plugins-good
  gstreamer1.0-plugins-bad gstreamer1.0-libav"
# Mounts a killed run left in the root go first: nothing may be removed or built through them
# (the root is deleted and made again below when it is not complete).
mounts_in_root() { awk -v p="$chr/" 'index($2, p) == 1 {print $2}' /proc/mounts | sort -r; }
for m in $(mounts_in_root); do umount "$m" 2>/dev/null || umount -l "$m" || true; done
if [ -n "$(mounts_in_root)" ]; then
  echo "test-analytics: cannot unmount $(mounts_in_root | head -n 1)" >&2; exit 1
fi
if [ ! -f "$chr/.morphoscope-ready" ]; then
  echo "== analytics: a Debian 13 root with GStreamer 1.26 (debootstrap, once)"
  rm -rf "$chr"
  mkdir -p "$chr"
  debootstrap --variant=minbase trixie "$chr" http://deb.debian.org/debian > "$root/target/trixie-debootstrap.log" 2>&1 || {
    tail -20 "$root/target/trixie-debootstrap.log" >&2; echo "test-analytics: debootstrap failed" >&2; exit 1; }
  cp /etc/resolv.conf "$chr/etc/resolv.conf"
  chroot "$chr" /bin/sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(echo $pkgs)" > "$root/target/trixie-apt.log" 2>&1 || {
    tail -20 "$root/target/trixie-apt.log" >&2; echo "test-analytics: installing GStreamer in the root failed" >&2; exit 1; }
  touch "$chr/.morphoscope-ready"
fi
mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" || true; done
}
trap cleanup EXIT
bind() { # host path, path in the root, [ro]
  mkdir -p "$chr$2"
  mount --bind "$1" "$chr$2"
  mounted+=("$chr$2")
  if [ "${3:-}" = ro ]; then mount -o remount,bind,ro "$chr$2"; fi
}
bind /proc /proc
bind /dev /dev
bind "$rustup_home" /opt/rustup ro
bind "$cargo_home" /opt/cargo
bind "$root" /src
echo "== analytics: GStreamer $(chroot "$chr" pkg-config --modversion gstreamer-analytics-1.0) in the Debian 13 root: the element's tests with --features analytics"
chroot "$chr" /usr/bin/env -i HOME=/root PATH=/opt/cargo/bin:/usr/bin:/bin \
  CARGO_HOME=/opt/cargo RUSTUP_HOME=/opt/rustup CARGO_TARGET_DIR=/src/target/trixie \
  CARGO_INCREMENTAL=0 /bin/sh -c 'cd /src &&
    cargo test -p gst-morphoscope --features analytics'
