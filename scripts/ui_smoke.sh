#!/usr/bin/env bash
# Smoke test of the real viewer window: under Xvfb, start `morphoscope view SOURCE` (default
# test:ball), take a screenshot of the whole screen after a few seconds (`import -window root`),
# check that it shows a drawn UI (many distinct colours, not a blank or black screen), and check
# that the viewer closes cleanly (it closes itself: `view --quit-after`; exit status 0, no
# panic in its log).
#
#   scripts/ui_smoke.sh [SOURCE]
#
# Environment: MORPHOSCOPE_BIN (default: $CARGO_TARGET_DIR/debug/morphoscope, target/ when unset;
# built if missing),
# UI_SMOKE_OUT (folder for screenshot.png and viewer.log; default: a temp folder),
# UI_SMOKE_SECS (seconds before the screenshot, default 6), UI_SMOKE_MIN_COLOURS (default 500),
# UI_SMOKE_RENDERER (glow, default, or wgpu: `view --renderer`). Needs xvfb (xvfb-run) and imagemagick.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source_arg=${1:-test:ball}
bin=${MORPHOSCOPE_BIN:-${CARGO_TARGET_DIR:-$root/target}/debug/morphoscope}
out=${UI_SMOKE_OUT:-$(mktemp -d)}
secs=${UI_SMOKE_SECS:-6}
min_colours=${UI_SMOKE_MIN_COLOURS:-500}
mkdir -p "$out"
for tool in xvfb-run import identify; do
  command -v "$tool" >/dev/null || { echo "ui_smoke: $tool missing (apt-get install xvfb imagemagick)" >&2; exit 2; }
done
if [ ! -x "$bin" ]; then
  (cd "$root" && cargo build --bin morphoscope)
fi
# A fresh data folder: the window must not depend on what an earlier session saved.
export XDG_DATA_HOME="$out/data" XDG_CONFIG_HOME="$out/config"
export UI_SMOKE_QUIT=$((secs + 5)) UI_SMOKE_RENDERER=${UI_SMOKE_RENDERER:-glow} RUST_LOG=${RUST_LOG:-info}
export UI_SMOKE_BIN="$bin" UI_SMOKE_SOURCE="$source_arg" UI_SMOKE_DIR="$out" UI_SMOKE_WAIT="$secs"
cd "$root"
status=0
xvfb-run -a -s "-screen 0 1440x900x24" bash -c '
  "$UI_SMOKE_BIN" view "$UI_SMOKE_SOURCE" --quit-after "$UI_SMOKE_QUIT" --renderer "$UI_SMOKE_RENDERER" --backend cpu --set source.test.frames=0 >"$UI_SMOKE_DIR/viewer.log" 2>&1 &
  pid=$!
  sleep "$UI_SMOKE_WAIT"
  if ! kill -0 "$pid" 2>/dev/null; then echo "viewer exited early" >&2; wait "$pid" || true; exit 3; fi
  import -window root "$UI_SMOKE_DIR/screenshot.png"
  wait "$pid"
' || status=$?
if [ ! -f "$out/screenshot.png" ]; then
  echo "ui_smoke: no screenshot (status $status):" >&2; cat "$out/viewer.log" >&2; exit 1
fi
colours=$(identify -format '%k' "$out/screenshot.png")
size=$(identify -format '%wx%h' "$out/screenshot.png")
echo "ui_smoke: screenshot $out/screenshot.png ($size, $colours colours); viewer exit status $status"
if grep -q "panicked" "$out/viewer.log"; then
  echo "ui_smoke: the viewer panicked:" >&2; cat "$out/viewer.log" >&2; exit 1
fi
if grep -q "running headless" "$out/viewer.log"; then
  echo "ui_smoke: no window was opened:" >&2; cat "$out/viewer.log" >&2; exit 1
fi
if [ "$colours" -lt "$min_colours" ]; then
  echo "ui_smoke: screenshot looks blank ($colours < $min_colours colours)" >&2; cat "$out/viewer.log" >&2; exit 1
fi
if [ "$status" -ne 0 ]; then
  echo "ui_smoke: the viewer did not exit cleanly (status $status):" >&2; cat "$out/viewer.log" >&2; exit 1
fi
echo "ui_smoke: ok"
