#!/usr/bin/env bash
# What the service endpoint costs: frames per second of the same run without and with
# `--listen`, the latter scraped every second (GET /metrics and GET /streams) as Prometheus and
# an orchestrator would. Rounds alternate (plain, served, plain, …) so that drift hits both.
#
# Usage: scripts/bench-service.sh [--rounds N] [--frames N] [--size WxH] [-- RUN-OPTIONS…]
#   e.g. scripts/bench-service.sh --frames 5000 -- --backend cuda
# Binary: $MORPHOSCOPE_BIN (default target/release/morphoscope). Needs python3.
# Prints a line per round (frames/s from each run's timings.json, scrapes made) and the medians;
# BENCHMARKS.md records the figures.
set -euo pipefail

bin=${MORPHOSCOPE_BIN:-target/release/morphoscope}
rounds=3
frames=3000
size=1920x1080
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --frames) frames=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "bench-service: unknown option $1" >&2; exit 2 ;;
  esac
done
width=${size%x*}
height=${size#*x}
common=(--no-video --quiet --max-frames "$frames" --set "source.test.frames=$frames"
  --set "source.test.width=$width" --set "source.test.height=$height" "${extra[@]}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fps_of() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["fps"])' "$1"; }

# The run on its own.
plain() {
  rm -rf "$tmp/plain"
  "$bin" run test:ball "${common[@]}" --out "$tmp/plain" >"$tmp/plain.out" 2>"$tmp/plain.err"
  fps_of "$tmp/plain/timings.json"
}

# The same run as stream 0 of a service, scraped every second until the stream has finished;
# prints its frames/s and the scrapes made.
served() {
  rm -rf "$tmp/served"
  "$bin" run --listen 127.0.0.1:0 test:ball "${common[@]}" --out "$tmp/served" \
    >"$tmp/served.out" 2>"$tmp/served.err" &
  local pid=$!
  local scrapes
  scrapes=$(python3 - "$tmp/served.out" <<'PY'
import json, re, sys, time, urllib.request
deadline = time.time() + 60
while True:
    m = re.search(r"listening on (http://\S+)", open(sys.argv[1]).read())
    if m:
        base = m.group(1)
        break
    if time.time() > deadline:
        sys.exit("the service did not start")
    time.sleep(0.05)
scrapes = 0
while True:
    urllib.request.urlopen(base + "/metrics").read()
    scrapes += 1
    rows = json.load(urllib.request.urlopen(base + "/streams"))
    if rows and rows[0]["state"] == "finished":
        break
    time.sleep(1)
print(scrapes)
PY
)
  kill -INT "$pid"
  wait "$pid" || true
  echo "$(fps_of "$tmp/served/0/timings.json") $scrapes"
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

echo "bench-service: $frames frames of $size per run, $rounds rounds; options: ${extra[*]:-(none)}"
: >"$tmp/plain.fps"
: >"$tmp/served.fps"
for r in $(seq 1 "$rounds"); do
  p=$(plain)
  read -r s n < <(served)
  echo "round $r: without --listen $p fps | with --listen, scraped every second $s fps ($n scrapes)"
  echo "$p" >>"$tmp/plain.fps"
  echo "$s" >>"$tmp/served.fps"
done
echo "median: without --listen $(median <"$tmp/plain.fps") fps | with --listen $(median <"$tmp/served.fps") fps"
