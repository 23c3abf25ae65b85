#!/usr/bin/env bash
# Cross-builds a release `morphoscope` for aarch64-unknown-linux-gnu (Jetson) on an x86-64
# Debian/Ubuntu machine, headless (`--no-default-features`: no viewer). Installs what it needs:
# the Rust target (rustup), Debian's aarch64 cross gcc, the arm64 GStreamer libraries through
# multiarch, and the arm64 GStreamer development files.
#
#   scripts/build-aarch64.sh            -> $CARGO_TARGET_DIR/aarch64-unknown-linux-gnu/release/morphoscope
#   scripts/build-aarch64.sh --lib-tests   -> the library's unit-test binary instead; its path
#                                            is written to .../release/lib-tests.path
#   SKIP_INSTALL=1 scripts/build-aarch64.sh   (packages already present)
#
# libgstreamer-plugins-base1.0-dev cannot be installed for two architectures at once (installing
# the arm64 one removes the x86-64 one), so its arm64 .deb is unpacked into a private sysroot
# under the target dir instead, with its .pc files pointed there and its .so links pointed at the
# arm64 runtime libraries that multiarch installs under /usr/lib/aarch64-linux-gnu. Nothing of
# the x86-64 build is replaced. Extra cargo arguments are passed on (e.g. `--features viewer`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"
target=aarch64-unknown-linux-gnu
target_dir=${CARGO_TARGET_DIR:-$root/target}
sysroot="$target_dir/aarch64-sysroot"

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
if [ "${SKIP_INSTALL:-0}" != 1 ]; then
  rustup target list --installed | grep -qx "$target" || rustup target add "$target"
  # liborc-0.4-dev:arm64: gstreamer-video-1.0.pc requires orc-0.4 (pkg-config reads it for the
  # cflags); it installs beside the x86-64 one (Multi-Arch: same).
  pkgs=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross libgstreamer1.0-dev:arm64
        libgstreamer-plugins-base1.0-0:arm64 liborc-0.4-dev:arm64)
  missing=()
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
    $SUDO apt-get update -qq
    echo "build-aarch64: installing ${missing[*]} (without binfmt for arm64, the arm64 glib's" \
      "post-install prints 'Exec format error' for glib-compile-schemas and gio-querymodules:" \
      "harmless, those steps are optional and the cross build uses neither)"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

# The arm64 plugins-base development files, unpacked (not installed) into the private sysroot.
libdir=/usr/lib/aarch64-linux-gnu
if [ ! -f "$sysroot$libdir/pkgconfig/gstreamer-video-1.0.pc" ]; then
  tmp=$(mktemp -d)
  chmod 777 "$tmp" # apt downloads as its own user (_apt): without write access there it warns
  (cd "$tmp" && apt-get download -q libgstreamer-plugins-base1.0-dev:arm64 >/dev/null)
  mkdir -p "$sysroot"
  dpkg-deb -x "$tmp"/libgstreamer-plugins-base1.0-dev_*_arm64.deb "$sysroot"
  rm -rf "$tmp"
  sed -i "s|^prefix=/usr\$|prefix=$sysroot/usr|" "$sysroot$libdir"/pkgconfig/*.pc
  for link in "$sysroot$libdir"/*.so; do
    ln -sf "$libdir/$(readlink "$link")" "$link"
  done
fi

export PKG_CONFIG_ALLOW_CROSS=1
export PKG_CONFIG_LIBDIR_aarch64_unknown_linux_gnu="$sysroot$libdir/pkgconfig:$libdir/pkgconfig:/usr/share/pkgconfig"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
start=$(date +%s)
if [ "${1:-}" = --lib-tests ]; then
  shift
  path_file="$target_dir/$target/release/lib-tests.path"
  cargo test --release --locked --target "$target" --no-default-features --lib --no-run "$@" 2>&1 \
    | tee /dev/stderr | sed -n 's/^ *Executable unittests src\/lib.rs (\(.*\))$/\1/p' > "$path_file"
  [ -s "$path_file" ] || { echo "build-aarch64: no unit-test binary" >&2; exit 1; }
  echo "build-aarch64: $(cat "$path_file") ($(( $(date +%s) - start )) s)"
  exit 0
fi
cargo build --release --locked --target "$target" --no-default-features --bin morphoscope "$@"
echo "build-aarch64: $target_dir/$target/release/morphoscope ($(( $(date +%s) - start )) s)"
