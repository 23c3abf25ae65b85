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
  # viewer (winit/glow/wgpu load these at run time) and its headless tests (xvfb-run needs xauth)
  libx11-6 libxcursor1 libxrandr2 libxi6 libxkbcommon-x11-0 libgl1 libegl1 libgl1-mesa-dri
  mesa-vulkan-drivers xvfb xauth imagemagick
  # scripts
  python3 python3-venv curl ca-certificates
  # MQTT broker for the `run --publish` tests (they start their own; the service need not run)
  mosquitto
  # RTSP server for the reconnect tests and the RTSP soak (tests/rtsp/server.py)
  gir1.2-gst-rtsp-server-1.0 python3-gi
  # Prometheus server and promtool for the service tests (they start their own server)
  prometheus
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # The package starts a Prometheus daemon on :9090 under systemd; the tests need only the
  # binaries, so a daemon this script brought in is stopped and disabled again.
  if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
    $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
fi

# Rust toolchain, 1.95 or newer (eframe 0.37). Where cargo is missing or older, rustup installs
# 1.95.0, the version CI builds with (rustup-init from static.rust-lang.org when rustup itself
# is missing): a newer stable's clippy brings new lints that `-D warnings` turns into errors, so
# a fresh machine gets the toolchain the code is checked with. cargo, rustc and rustup are
# linked into /usr/local/bin so that the command after this script (`cargo run`,
# scripts/test.sh) finds them.
rust_version=1.95.0
cargo_bin="${CARGO_HOME:-$HOME/.cargo}/bin"
[ -x "$cargo_bin/cargo" ] && export PATH="$cargo_bin:$PATH"
rust_ok() {
  local v
  v=$(cargo --version 2>/dev/null | awk '{print $2}') || return 1
  [ -n "$v" ] && [ "$(printf '%s\n' 1.95.0 "$v" | sort -V | head -n 1)" = 1.95.0 ]
}
if ! rust_ok; then
  if command -v rustup >/dev/null 2>&1; then
    rustup toolchain install "$rust_version" --profile minimal
    rustup default "$rust_version"
  else
    # Named rustup-init: the program acts on the name it is called by.
    dl=$(mktemp -d)
    curl --proto '=https' --tlsv1.2 -sSf -o "$dl/rustup-init" \
      "https://static.rust-lang.org/rustup/dist/$(uname -m)-unknown-linux-gnu/rustup-init"
    chmod +x "$dl/rustup-init"
    "$dl/rustup-init" -y -q --profile minimal --default-toolchain "$rust_version" --no-modify-path
    rm -rf "$dl"
    export PATH="$cargo_bin:$PATH"
  fi
  rust_ok || { echo "setup: Rust >= 1.95 could not be installed (cargo: $(command -v cargo || echo none))" >&2; exit 1; }
  for b in cargo rustc rustup; do
    [ -e "/usr/local/bin/$b" ] || $SUDO ln -s "$cargo_bin/$b" "/usr/local/bin/$b"
  done
  echo "setup: Rust $(cargo --version | awk '{print $2}') installed with rustup ($cargo_bin, linked in /usr/local/bin)"
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
