#!/usr/bin/env bash
# The project's test command (what .ci/run and the README call): style (rustfmt, clippy and
# rustdoc with warnings as errors), every CPU test, the end-to-end
# CLI tests, and the NVRTC compile check of every kernel for sm_90/sm_110/sm_87 (NVRTC 13) and sm_72
# (NVRTC 12) using the wheels that scripts/setup.sh put in .venv-nvrtc. GPU parity tests
# (tests/gpu.rs) skip here without a GPU; run them on a GPU machine (see BENCHMARKS.md). Last,
# the viewer's real-window smoke test under Xvfb (scripts/ui_smoke.sh) where xvfb is installed.
# The GStreamer element (gst-morphoscope/): its tests, then `gst-inspect-1.0 morphoscope` on the
# built plugin (fails when the element is not listed), then its `analytics` feature (type-checked
# only where GStreamer's analytics library, 1.24 or newer, is missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
site=$(ls -d "$root"/.venv-nvrtc/lib/python3*/site-packages 2>/dev/null | head -n 1 || true)
nv13="$site/nvidia/cu13/lib"
nv12="$site/nvidia/cuda_nvrtc/lib"
if [ -d "$nv13" ]; then export LD_LIBRARY_PATH="$nv13${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
export MORPHOSCOPE_NVRTC_ARCHS="${MORPHOSCOPE_NVRTC_ARCHS:-sm_90,sm_110,sm_87}"
echo "== style: cargo fmt --check, clippy and the library's docs with warnings as errors"
if command -v rustup >/dev/null 2>&1; then rustup component add rustfmt clippy >/dev/null 2>&1 || true; fi
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy --no-default-features -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p morphoscope
cargo test "$@"
echo "== GStreamer element: tests and gst-inspect-1.0"
cargo test -p gst-morphoscope
cargo build -p gst-morphoscope --lib
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
registry=$(mktemp -d)
inspect=$(GST_PLUGIN_PATH="$target/debug" GST_REGISTRY="$registry/registry.bin" gst-inspect-1.0 morphoscope) || {
  echo "gst-inspect-1.0 does not list the morphoscope element (GST_PLUGIN_PATH=$target/debug)" >&2; exit 1; }
rm -rf "$registry"
for p in backend config draw qos ring-size cca maxtree orientation segmentation; do
  grep -q "^  $p " <<<"$inspect" || { echo "gst-inspect-1.0 morphoscope: property $p missing" >&2; exit 1; }
done
# The `analytics` feature needs GStreamer >= 1.24's analytics library, which Debian 12 (1.22)
# lacks: a pkg-config stand-in lets clippy type-check it against the gstreamer-analytics
# bindings (nothing is linked or run).
if ! pkg-config --exists 'gstreamer-analytics-1.0 >= 1.24'; then
  shim=$(mktemp -d)
  printf '%s\n' 'Name: gstreamer-analytics-1.0 (type-check stand-in)' 'Description: scripts/test.sh' \
    'Version: 1.24.0' 'Requires: gstreamer-1.0' 'Libs: -lgstanalytics-1.0' 'Cflags:' \
    > "$shim/gstreamer-analytics-1.0.pc"
  echo "== GStreamer element: the analytics feature type-checked (GStreamer 1.24 absent, not linked)"
  PKG_CONFIG_PATH="$shim${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
    cargo clippy -p gst-morphoscope --features analytics --all-targets -- -D warnings
  rm -rf "$shim"
else
  echo "== GStreamer element: the analytics feature"
  cargo clippy -p gst-morphoscope --features analytics --all-targets -- -D warnings
  cargo test -p gst-morphoscope --features analytics
fi
if [ -d "$nv12" ]; then
  echo "== NVRTC 12: kernel compile check for sm_72 (Jetson Xavier)"
  LD_LIBRARY_PATH="$nv12" MORPHOSCOPE_NVRTC_ARCHS=sm_72 cargo test --test kernels_compile
elif [ "${MORPHOSCOPE_REQUIRE_NVRTC:-0}" = 1 ]; then
  echo "NVRTC 12 missing (.venv-nvrtc): cannot check sm_72" >&2; exit 1
fi
if command -v xvfb-run >/dev/null 2>&1 && command -v import >/dev/null 2>&1; then
  echo "== viewer smoke test: a real window under Xvfb (scripts/ui_smoke.sh)"
  bash scripts/ui_smoke.sh
elif [ "${MORPHOSCOPE_REQUIRE_UI_SMOKE:-0}" = 1 ]; then
  echo "xvfb-run/imagemagick missing: cannot run the viewer smoke test" >&2; exit 1
fi
bash scripts/test-python.sh
