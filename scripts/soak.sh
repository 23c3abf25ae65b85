#!/usr/bin/env bash
# Soak test: a long headless run of a test source through all four analyses, with the process's
# host memory (RSS, from /proc) and GPU memory (nvidia-smi, where present) sampled every second
# into a CSV. At the end it prints the slope of each after warm-up (least squares, MB per 1000
# frames: flat is ~0) and the frames in/out/dropped (a test source must lose none).
#
#   scripts/soak.sh [FRAMES] [--video] [--size WxH] [--pattern P] [--warmup N] [--out DIR] [-- ARGS]
#
#   FRAMES      frames of the test source (default 100000)
#   --video     also write the overlay video (default --no-video)
#   --size      frame size (default 1920x1080)
#   --pattern   test pattern (default ball: it moves, so components are tracked)
#   --warmup    frames left out of the slopes (default 10% of FRAMES)
#   --out       output folder (default a new temporary one); soak.csv is written there
#   -- ARGS     passed to `morphoscope run` (e.g. -- --backend cpu)
#
# The binary: $MORPHOSCOPE (a command line; on the GPU machine `bash .device/run.sh morphoscope`),
# else target/release/morphoscope. The sampled process is the one named `morphoscope` under it
# (else the first process under it without children).
set -euo pipefail

frames=100000 video=0 size=1920x1080 pattern=ball warmup="" out="" extra=()
while [ $# -gt 0 ]; do
  case "$1" in
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
warmup=${warmup:-$((frames / 10))}
out=${out:-$(mktemp -d -t morphoscope-soak.XXXXXX)}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
read -r -a cmd <<<"${MORPHOSCOPE:-$root/target/release/morphoscope}"

args=(run "test:$pattern" --quiet --out "$out/run"
  --set "source.test.frames=$frames" --set "source.test.width=$width" --set "source.test.height=$height"
  --set maxtree.enabled=true --set cca.enabled=true --set orientation.enabled=true --set segmentation.enabled=true)
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
echo "seconds,frames,rss_mb,gpu_mb" >"$csv"
gpu=0; command -v nvidia-smi >/dev/null 2>&1 && gpu=1
pid="" start=$(date +%s)
while kill -0 "$launcher" 2>/dev/null; do
  sleep 1
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || pid=$(find_morphoscope "$launcher")
  [ -n "$pid" ] || continue
  rss_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
  [ -n "$rss_kb" ] || continue
  done_frames=$(wc -l <"$out/run/frames.jsonl" 2>/dev/null || echo 0)
  gpu_mb=""
  if [ "$gpu" = 1 ]; then
    gpu_mb=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null \
      | awk -F', *' -v p="$pid" '$1 == p {print $2}' | head -n 1)
  fi
  echo "$(( $(date +%s) - start )),$done_frames,$(awk -v k="$rss_kb" 'BEGIN {printf "%.1f", k / 1024}'),$gpu_mb" >>"$csv"
done
status=0; wait "$launcher" || status=$?

# Least-squares slope of a column against frames, samples past the warm-up, MB per 1000 frames.
slope() {
  awk -F, -v col="$1" -v w="$warmup" 'NR > 1 && $2 >= w && $col != "" {
      n++; x = $2; y = $col; sx += x; sy += y; sxx += x * x; sxy += x * y; last = y }
    END {
      if (n < 3) { print "n/a (fewer than 3 samples after warm-up)"; exit }
      d = n * sxx - sx * sx
      if (d == 0) { print "n/a (no frames between samples)"; exit }
      printf "%+.3f MB per 1000 frames (%d samples, last %.1f MB)\n", (n * sxy - sx * sy) / d * 1000, n, last }' "$csv"
}

echo "soak: $frames frames of ${width}x${height} test:$pattern, all four analyses, $([ "$video" = 1 ] && echo "with" || echo "no") video; exit $status"
echo "samples: $(($(wc -l <"$csv") - 1)) in $csv (warm-up: the first $warmup frames left out)"
echo "host RSS slope: $(slope 3)"
if [ "$gpu" = 1 ]; then echo "GPU memory slope: $(slope 4)"; else echo "GPU memory: not sampled (no nvidia-smi)"; fi
counts=$(grep -m1 '^frames: in ' "$out/stdout" || true)
echo "${counts:-frames: no summary (see $out/stderr)}"
tail -n 3 "$out/stderr" | grep '^error' || true
lost=0
if [[ "$counts" =~ in\ ([0-9]+)\ \|\ out\ ([0-9]+)\ \|\ dropped\ ([0-9]+) ]]; then
  [ "${BASH_REMATCH[1]}" = "$frames" ] && [ "${BASH_REMATCH[2]}" = "$frames" ] && [ "${BASH_REMATCH[3]}" = 0 ] || lost=1
else
  lost=1
fi
[ "$lost" = 0 ] && echo "no frame lost" || echo "frames lost or run incomplete (expected in = out = $frames, dropped 0)"
[ "$status" = 0 ] && [ "$lost" = 0 ]
