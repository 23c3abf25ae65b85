#!/usr/bin/env bash
# Soak test: a long headless run through all four analyses, with the process's host memory
# (RSS), open file descriptors and threads (from /proc) and GPU memory (nvidia-smi, where
# present) sampled every second into a CSV. At the end it prints the slope of each after
# warm-up (least squares: flat is ~0).
#
# Two sources. By default a test source of FRAMES frames: slopes per 1000 frames, and the
# frames in/out/dropped checked (a test source must lose none). With --rtsp-restart SECONDS, a
# live RTSP camera (tests/rtsp/server.py, GStreamer's RTSP server through python3-gi) that is
# killed and started again every SECONDS for --duration SECONDS: the run must reconnect each
# time, and its outputs are cut into 60 s segments; slopes per hour, and the run is stopped with
# SIGINT at the end (exit 130 expected).
#
#   scripts/soak.sh [FRAMES] [--video] [--size WxH] [--pattern P] [--warmup N] [--out DIR] [-- ARGS]
#   scripts/soak.sh --rtsp-restart 30 --duration 1800 [--size WxH] [--out DIR] [-- ARGS]
#
# GPU soak (on the GPU machine): scripts/soak.sh 100000 -- --backend cuda
#   (1920x1080 test:ball, all four analyses, RSS, fds, threads and GPU memory sampled).
# CPU soak of reconnects: scripts/soak.sh --rtsp-restart 30 --duration 1800 --size 320x240 \
#   -- --backend cpu
#
#   FRAMES      frames of the test source (default 100000)
#   --video     also write the overlay video (default --no-video)
#   --size      frame size (default 1920x1080)
#   --pattern   test pattern (default ball: it moves, so components are tracked)
#   --warmup    frames left out of the slopes (default 10% of FRAMES)
#   --out       output folder (default a new temporary one); soak.csv is written there
#   --rtsp-restart S  the RTSP camera, restarted every S seconds (2 s down each time)
#   --duration S      how long the RTSP soak runs (default 1800)
#   -- ARGS     passed to `morphoscope run` (e.g. -- --backend cpu)
#
# The binary: $MORPHOSCOPE (a command line; on the GPU machine `bash .device/run.sh morphoscope`),
# else target/release/morphoscope. The sampled process is the one named `morphoscope` under it
# (else the first process under it without children).
set -euo pipefail

frames=100000 video=0 size=1920x1080 pattern=ball warmup="" out="" extra=()
restart="" duration=1800
while [ $# -gt 0 ]; do
  case "$1" in
    --rtsp-restart) restart=$2; shift ;;
    --duration) duration=$2; shift ;;
    --video) video=1 ;;
    --size) size=$2; shift ;;
    --pattern) pattern=$2; shift ;;
    --warmup) warmup=$2; shift ;;
    --out) out=$2; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *[!0-9]*) echo "soak: unknown argument $1 (--help)" >&2; exit 2 ;;
    *) frames=$1 ;;
  esac
  shift
done
width=${size%x*} height=${size#*x}
out=${out:-$(mktemp -d -t morphoscope-soak.XXXXXX)}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
read -r -a cmd <<<"${MORPHOSCOPE:-$root/target/release/morphoscope}"
analyses=(--set maxtree.enabled=true --set cca.enabled=true --set orientation.enabled=true
  --set segmentation.enabled=true)

server="" port=""
start_server() {
  /usr/bin/python3 "$root/tests/rtsp/server.py" "$port" "$width" "$height" 15 >"$out/server.log" 2>&1 &
  server=$!
  for _ in $(seq 1 600); do grep -q ready "$out/server.log" 2>/dev/null && return; sleep 0.1; done
  echo "soak: the RTSP server did not start (see $out/server.log)" >&2; exit 1
}
stop_server() { [ -z "$server" ] || { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; server=""; }; }

if [ -n "$restart" ]; then
  port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  start_server
  trap stop_server EXIT
  warmup=${warmup:-120}
  args=(run "rtsp://127.0.0.1:$port/test" --quiet --out "$out/run" "${analyses[@]}"
    --set source.timeout_seconds=3 --set source.reconnect.initial_seconds=0.5
    --set source.reconnect.max_seconds=2 --set output.segment_seconds=60)
else
  warmup=${warmup:-$((frames / 10))}
  args=(run "test:$pattern" --quiet --out "$out/run"
    --set "source.test.frames=$frames" --set "source.test.width=$width" --set "source.test.height=$height"
    "${analyses[@]}")
fi
[ "$video" = 1 ] || args+=(--no-video)
args+=("${extra[@]}")

echo "soak: ${cmd[*]} ${args[*]}"
"${cmd[@]}" "${args[@]}" >"$out/stdout" 2>"$out/stderr" &
launcher=$!

# The process named morphoscope: the launcher itself or one of its descendants.
children_of() {
  local f line rest ppid
  for f in /proc/[0-9]*/stat; do
    line=$(cat "$f" 2>/dev/null) || continue
    rest=${line##*) }
    read -r _ ppid _ <<<"$rest"
    if [ "$ppid" = "$1" ]; then f=${f#/proc/}; echo "${f%/stat}"; fi
  done
}
find_morphoscope() {
  # Breadth first; a binary under another name: the first process without children.
  local queue=("$1") p kids leaf=""
  while [ ${#queue[@]} -gt 0 ]; do
    p=${queue[0]}; queue=("${queue[@]:1}")
    if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = morphoscope ]; then echo "$p"; return; fi
    mapfile -t kids < <(children_of "$p")
    [ ${#kids[@]} -gt 0 ] || leaf=${leaf:-$p}
    queue+=("${kids[@]}")
  done
  echo "$leaf"
}

csv="$out/soak.csv"
echo "seconds,frames,rss_mb,gpu_mb,fds,threads" >"$csv"
gpu=0; command -v nvidia-smi >/dev/null 2>&1 && gpu=1
pid="" start=$(date +%s) restarted=$(date +%s) restarts=0 stopped=0
while kill -0 "$launcher" 2>/dev/null; do
  sleep 1
  now=$(date +%s)
  if [ -n "$restart" ]; then
    if [ $((now - start)) -ge "$duration" ]; then
      # Once: a second SIGINT would quit at once instead of finishing the files.
      if [ "$stopped" = 0 ]; then
        stopped=1
        [ -n "$pid" ] && kill -INT "$pid" 2>/dev/null || kill -INT "$launcher" 2>/dev/null || true
      fi
    elif [ $((now - restarted)) -ge "$restart" ]; then
      stop_server; sleep 2; start_server; restarted=$(date +%s); restarts=$((restarts + 1))
    fi
  fi
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || pid=$(find_morphoscope "$launcher")
  [ -n "$pid" ] || continue
  rss_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
  threads=$(awk '/^Threads:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
  [ -n "$rss_kb" ] || continue
  # The process may end between two reads: then this sample is skipped.
  fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l) || continue
  # Frames written, from timings.json (rewritten every 2 s; frames.jsonl may be in segments).
  done_frames=$(sed -n 's/^ *"frames_out": \([0-9]*\).*/\1/p' "$out/run/timings.json" 2>/dev/null | head -n 1) || true
  done_frames=${done_frames:-0}
  gpu_mb=""
  if [ "$gpu" = 1 ]; then
    gpu_mb=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null \
      | awk -F', *' -v p="$pid" '$1 == p {print $2}' | head -n 1)
  fi
  echo "$((now - start)),$done_frames,$(awk -v k="$rss_kb" 'BEGIN {printf "%.1f", k / 1024}'),$gpu_mb,$fds,$threads" >>"$csv"
done
status=0; wait "$launcher" || status=$?

# Least-squares slope of a column after the warm-up: against frames (per 1000 frames) for a test
# source, against seconds (per hour) for the RTSP soak.
slope() {
  local x=2 per=1000 unit="1000 frames"
  [ -n "$restart" ] && x=1 per=3600 unit="hour"
  awk -F, -v col="$1" -v xc="$x" -v w="$warmup" -v per="$per" -v unit="$unit" -v what="$2" \
    'NR > 1 && $xc >= w && $col != "" {
      n++; x = $xc; y = $col; sx += x; sy += y; sxx += x * x; sxy += x * y; last = y
      if (n == 1) first = y }
    END {
      if (n < 3) { print "n/a (fewer than 3 samples after warm-up)"; exit }
      d = n * sxx - sx * sx
      if (d == 0) { print "n/a (no progress between samples)"; exit }
      printf "%+.3f %s per %s (%d samples, first %s, last %s)\n", (n * sxy - sx * sy) / d * per, what, unit, n, first, last }' "$csv"
}

if [ -n "$restart" ]; then
  echo "soak: RTSP ${width}x${height} camera restarted every $restart s ($restarts restarts) for $duration s, all four analyses; exit $status"
  echo "samples: $(($(wc -l <"$csv") - 1)) in $csv (warm-up: the first $warmup s left out)"
else
  echo "soak: $frames frames of ${width}x${height} test:$pattern, all four analyses, $([ "$video" = 1 ] && echo "with" || echo "no") video; exit $status"
  echo "samples: $(($(wc -l <"$csv") - 1)) in $csv (warm-up: the first $warmup frames left out)"
fi
echo "host RSS slope: $(slope 3 MB)"
if [ "$gpu" = 1 ]; then echo "GPU memory slope: $(slope 4 MB)"; else echo "GPU memory: not sampled (no nvidia-smi)"; fi
echo "open fds slope: $(slope 5 fds)"
echo "threads slope: $(slope 6 threads)"
counts=$(grep -m1 '^frames: in ' "$out/stdout" || true)
echo "${counts:-frames: no summary (see $out/stderr)}"
tail -n 3 "$out/stderr" | grep '^error' || true
if [ -n "$restart" ]; then
  backs=$(grep -c '"event":"back"' "$out/run/events.jsonl" 2>/dev/null) || true
  echo "reconnects: $backs back of $restarts restarts (events.jsonl)"
  [ "$status" = 130 ] && [ "${backs:-0}" -ge "$restarts" ]
  exit
fi
lost=0
if [[ "$counts" =~ in\ ([0-9]+)\ \|\ out\ ([0-9]+)\ \|\ dropped\ ([0-9]+) ]]; then
  [ "${BASH_REMATCH[1]}" = "$frames" ] && [ "${BASH_REMATCH[2]}" = "$frames" ] && [ "${BASH_REMATCH[3]}" = 0 ] || lost=1
else
  lost=1
fi
[ "$lost" = 0 ] && echo "no frame lost" || echo "frames lost or run incomplete (expected in = out = $frames, dropped 0)"
[ "$status" = 0 ] && [ "$lost" = 0 ]
