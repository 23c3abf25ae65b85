#!/usr/bin/env bash
# Installs everything morphoscope needs to build, test and run on Debian/Ubuntu, and fetches the
# default sample clip. Idempotent: packages already present are skipped by apt; the sample is
# extracted once. Run as root or with sudo available.
#
#   scripts/setup.sh            system packages + sample clip + NVRTC venv (for the kernel check)
#   SKIP_NVRTC=1 scripts/setup.sh   without the ~60 MB NVRTC wheel
#   SKIP_PLUGIN=1 scripts/setup.sh  without building the GStreamer element (release)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "setup: need root or sudo to install packages" >&2; exit 1; fi
fi

pkgs=(
  # build
  pkg-config build-essential libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev
  # GStreamer runtime: sources, decoders, encoders, tools
  gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad
  gstreamer1.0-plugins-ugly gstreamer1.0-libav gstreamer1.0-tools
  # viewer (winit/glow/wgpu load these at run time) and its headless tests
  libx11-6 libxcursor1 libxrandr2 libxi6 libxkbcommon-x11-0 libgl1 libegl1 libgl1-mesa-dri
  mesa-vulkan-drivers xvfb imagemagick
  # scripts
  python3 python3-venv curl ca-certificates
  # MQTT broker for the `run --publish` tests (they start their own; the service need not run)
  mosquitto
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Rust toolchain (the project needs 1.95 or newer for eframe 0.37).
if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then export PATH="$HOME/.cargo/bin:$PATH"; else
    echo "setup: cargo not found; install Rust >= 1.95 with rustup (https://rustup.rs)" >&2; exit 1; fi
fi

# Default sample clip: vtest.avi (768x576 pedestrians) from Debian's opencv-doc package,
# extracted without installing the package. Licence: see assets/samples/PROVENANCE.
sample="$root/assets/samples/vtest.avi"
if [ ! -s "$sample" ]; then
  tmp=$(mktemp -d)
  if (cd "$tmp" && apt-get download opencv-doc >/dev/null 2>&1); then
    dpkg-deb -x "$tmp"/opencv-doc_*.deb "$tmp/x"
    mkdir -p "$root/assets/samples"
    found=$(find "$tmp/x" -name vtest.avi | head -n 1)
    if [ -n "$found" ]; then
      cp "$found" "$sample"
      # a few real still images for the image tests and benchmarks
      for f in lena.jpg baboon.jpg fruits.jpg building.jpg pic1.png text_motion.jpg; do
        g=$(find "$tmp/x" -name "$f" | head -n 1); [ -n "$g" ] && cp "$g" "$root/assets/samples/" || true
      done
      echo "setup: sample clip at assets/samples/vtest.avi"
    fi
  else
    echo "setup: opencv-doc could not be downloaded; the default source falls back to a test pattern" >&2
  fi
  rm -rf "$tmp"
fi

# NVRTC from PyPI, so the kernel compile check runs without a GPU or CUDA install.
if [ "${SKIP_NVRTC:-0}" != 1 ] && [ ! -d "$root/.venv-nvrtc" ]; then
  if python3 -m venv "$root/.venv-nvrtc" && "$root/.venv-nvrtc/bin/pip" install -q nvidia-cuda-nvrtc nvidia-cuda-nvrtc-cu12; then
    echo "setup: NVRTC installed in .venv-nvrtc"
  else
    echo "setup: NVRTC wheel could not be installed; the kernel compile check will skip" >&2
    rm -rf "$root/.venv-nvrtc"
  fi
fi
# The GStreamer element: libgstmorphoscope.so in the release folder of the target directory.
if [ "${SKIP_PLUGIN:-0}" != 1 ]; then
  if cargo build --release -p gst-morphoscope; then
    target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
    echo "setup: GStreamer element built: export GST_PLUGIN_PATH=$target/release (then: gst-inspect-1.0 morphoscope)"
  else
    echo "setup: the GStreamer element did not build" >&2
  fi
fi
echo "setup: done"
