#!/usr/bin/env bash
# End-to-end checks of the cross-built aarch64 binary under qemu-user (no Jetson needed):
#  1. `morphoscope image` for every analysis (gray, area-opening/closing, attribute-filter, cca,
#     linear-opening, orientation, segmentation) on the held-out real images (tests/data crops and
#     assets/samples photos), CPU backend; every output file must equal, byte for byte, what the
#     x86-64 binary writes for the same command;
#  2. the max-tree outputs must also equal the scikit-image goldens in tests/data/maxtree pixel
#     for pixel (dtype, shape, data), as the x86 CLI test checks; the other goldens (OpenCV
#     components, scikit-image segmentation, linear openings) are compared by the x86 tests with
#     their own rules (sorting, label permutation), and step 1 makes the aarch64 outputs equal to
#     the x86 ones bit for bit;
#  3. a short headless `morphoscope run` of the test source (CPU backend): frames in = frames out;
#  4. with --lib-tests only (not in CI: a second aarch64 release build and the property tests
#     under emulation take about 20 min on 2 cores, where step 1 already holds every op's
#     output to the x86-64 one bit for bit): the library's unit tests (every CPU op against its
#     naive reference, parsing, element choice; GPU tests skip), cross-built by
#     `scripts/build-aarch64.sh --lib-tests`.
#
#   scripts/test-aarch64.sh [--lib-tests]
#
# Needs scripts/build-aarch64.sh first (the binary and the arm64 libraries) and an x86-64
# `morphoscope` (built here with `cargo build --bin morphoscope` when missing). Installs Debian's
# qemu-user-static and the arm64 GStreamer plugins the tests use: base (test source, conversion),
# ugly (x264, the overlay video's software encoder), bad (h264parse, which the video writer puts
# before the muxer) and libav (H.264 decoding, to read that video back). qemu is called
# explicitly, so no binfmt registration is needed (CI containers usually have none).
set -euo pipefail
lib_tests=0
case "${1:-}" in
  --lib-tests) lib_tests=1 ;;
  "") ;;
  *) echo "test-aarch64: unknown argument $1 (--lib-tests)" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"
target_dir=${CARGO_TARGET_DIR:-$root/target}
arm="$target_dir/aarch64-unknown-linux-gnu/release/morphoscope"
x86=${MORPHOSCOPE_X86_BIN:-$target_dir/debug/morphoscope}
[ -x "$arm" ] || { echo "test-aarch64: $arm missing (run scripts/build-aarch64.sh)" >&2; exit 1; }

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
if [ "${SKIP_INSTALL:-0}" != 1 ]; then
  missing=()
  for p in qemu-user-static gstreamer1.0-plugins-base:arm64 gstreamer1.0-plugins-ugly:arm64 \
           gstreamer1.0-plugins-bad:arm64 gstreamer1.0-libav:arm64; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi
[ -x "$x86" ] || cargo build --bin morphoscope

# arm64 libraries come from multiarch (/lib/ld-linux-aarch64.so.1, /usr/lib/aarch64-linux-gnu).
# GStreamer scans plugins in-process: its scanner helper is an arm64 program that could not be
# spawned without binfmt.
export QEMU_LD_PREFIX=/ GST_REGISTRY_FORK=no
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GST_REGISTRY="$work/registry.aarch64.bin"
mkdir -p "$work/arm" "$work/x86"
arm_run() { qemu-aarch64-static "$arm" "$@"; }

checks=0
# check NAME OUTPUT ARGS...: runs `image ARGS --out <dir>/OUTPUT` with both binaries (`@DIR@`
# in ARGS becomes that binary's output folder), then compares every file each wrote.
check() {
  local name=$1 output=$2; shift 2
  mkdir -p "$work/arm/$name" "$work/x86/$name"
  "$x86" image --backend cpu "${@//@DIR@/$work/x86/$name}" --out "$work/x86/$name/$output" > /dev/null
  arm_run image --backend cpu "${@//@DIR@/$work/arm/$name}" --out "$work/arm/$name/$output" > /dev/null
  [ -e "$work/arm/$name/$output" ] || { echo "test-aarch64: FAIL $name: no output" >&2; exit 1; }
  if ! diff -r "$work/x86/$name" "$work/arm/$name" > /dev/null; then
    echo "test-aarch64: FAIL $name: aarch64 output differs from x86-64 ($*)" >&2
    diff -rq "$work/x86/$name" "$work/arm/$name" >&2 || true
    exit 1
  fi
  checks=$((checks + 1))
}
# npy_equal A B: same dtype, shape and data bytes (NumPy's .npy header may be padded differently).
npy_equal() {
  python3 - "$1" "$2" <<'PY'
import ast, sys
def load(p):
    b = open(p, "rb").read()
    assert b[:6] == b"\x93NUMPY", p
    n = int.from_bytes(b[8:10], "little") if b[6] == 1 else int.from_bytes(b[8:12], "little")
    off = 10 if b[6] == 1 else 12
    h = ast.literal_eval(b[off:off + n].decode("latin1"))
    return h["descr"], h["fortran_order"], tuple(h["shape"]), b[off + n:]
a, b = load(sys.argv[1]), load(sys.argv[2])
sys.exit(0 if a == b else 1)
PY
}

data=tests/data
start=$(date +%s)
echo "== aarch64 (qemu) vs x86-64: image ops of every analysis on real images"
for f in assets/samples/*.jpg assets/samples/*.png; do
  [ -f "$f" ] && check "gray-$(basename "$f")" out.png --op gray "$f"
done
# Max-tree area filters: the goldens' own cases (<input>_<opening|closing>_a<AREA>_c<CONN>.npy).
for g in "$data"/maxtree/*_a*_c*.npy; do
  base=$(basename "$g" .npy)
  input="$data/maxtree/${base%%_opening*}.npy"; op=area-opening
  case "$base" in *_closing_*) input="$data/maxtree/${base%%_closing*}.npy"; op=area-closing ;; esac
  area=${base##*_a}; area=${area%%_c*}; conn=${base##*_c}
  check "$base" out.npy --op "$op" --area "$area" --connectivity "$conn" "$input"
  if ! npy_equal "$work/arm/$base/out.npy" "$g"; then
    echo "test-aarch64: FAIL $base: aarch64 output differs from the scikit-image golden" >&2; exit 1
  fi
  checks=$((checks + 1))
done
for attr in height volume diameter; do
  check "attribute-$attr" out.npy --op attribute-filter --attribute "$attr" --threshold 40 \
    --rule direct --tree max "$data/maxtree/building_u8.npy"
done
for g in "$data"/cca/*_gray.npy; do
  stem=$(basename "$g" _gray.npy)
  for conn in 4 8; do
    check "cca-$stem-$conn" stats.json --op cca --threshold otsu --connectivity "$conn" \
      --labels @DIR@/labels.npy "$g"
  done
done
for g in "$data"/orientation/*_input.npy; do
  stem=$(basename "$g" _input.npy)
  check "linear-opening-$stem" out.npy --op linear-opening --length 15 --angle 30 "$g"
  check "linear-closing-$stem" out.npy --op linear-opening --length 21 --angle 120 --closing "$g"
  check "orientation-$stem" dir --op orientation --length 15 --angles 8 "$g"
done
for g in "$data"/segmentation/*_rgb.npy "$data"/segmentation/text_gray.npy; do
  stem=$(basename "$g" .npy)
  check "segmentation-$stem" labels.npy --op segmentation --scale 100 --sigma 0.8 --min-size 20 "$g"
done
echo "test-aarch64: $checks image checks passed ($(( $(date +%s) - start )) s under qemu)"

echo "== aarch64 (qemu): headless run of the test source"
frames=12
arm_run run test:ball --backend cpu --no-video --quiet --out "$work/run" \
  --set source.test.frames=$frames --set source.test.width=320 --set source.test.height=240
got=$(wc -l < "$work/run/frames.jsonl")
if [ "$got" != "$frames" ]; then
  echo "test-aarch64: FAIL run: $frames frames in, $got lines in frames.jsonl" >&2; exit 1
fi
echo "test-aarch64: run passed ($frames frames in, $got out; $(( $(date +%s) - start )) s in all)"
if [ "$lib_tests" = 0 ]; then
  echo "test-aarch64: all passed ($(( $(date +%s) - start )) s in all; the unit tests under qemu: --lib-tests)"
  exit 0
fi

echo "== aarch64 (qemu): the library's unit tests"
SKIP_INSTALL=1 bash scripts/build-aarch64.sh --lib-tests > "$work/lib-tests-build.log" 2>&1 \
  || { tail -30 "$work/lib-tests-build.log" >&2; exit 1; }
qemu-aarch64-static "$(cat "$target_dir/aarch64-unknown-linux-gnu/release/lib-tests.path")" --test-threads=2 \
  2>&1 | grep -E "^test result|FAILED|panicked"
[ "${PIPESTATUS[0]}" = 0 ] || { echo "test-aarch64: FAIL unit tests under qemu" >&2; exit 1; }
echo "test-aarch64: all passed ($(( $(date +%s) - start )) s in all)"
