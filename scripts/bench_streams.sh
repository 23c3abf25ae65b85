#!/usr/bin/env bash
# The most live 1080p streams at 30 fps that hold with no frame dropped, on one GPU and on two
# (issue "Many streams, many GPUs"): `morphoscope bench --streams MAX --streams-sweep` for each
# case, results as JSON and logs under $OUT. Each case takes 2-4 minutes (about 8 trials of
# 10 s plus start-up); run the cases one at a time where a command has a time limit.
# Usage: bash scripts/bench_streams.sh [all1] [noseg1] [all2] [noseg2]
#   MORPHOSCOPE=path/to/morphoscope (default: target/release/morphoscope)
#   CLIP=path/to/clip (default: assets/samples/vtest.avi; its frames are scaled to 1080p)
set -uo pipefail
OUT=${OUT:-/tmp/morphoscope-out}; mkdir -p "$OUT"
BIN=${MORPHOSCOPE:-target/release/morphoscope}
CLIP=${CLIP:-assets/samples/vtest.avi}
common=(bench --source "$CLIP" --size 1920x1080 --frames 30 --warmup 60 --fps 30 --seconds 10 --streams-sweep --backend cuda)
off_seg=(--set segmentation.enabled=false)
case_run() { # name, max streams, devices, extra args...
  local name=$1 max=$2 dev=$3; shift 3
  echo "== $name: up to $max streams on --device $dev"
  "$BIN" "${common[@]}" --streams "$max" --device "$dev" --json "$OUT/streams_$name.json" "$@" \
    > "$OUT/streams_$name.log" 2>&1
  echo "rc=$?"
  grep -E "^sweep:|^most streams|^fewest|^not even" "$OUT/streams_$name.log"
}
[ $# -eq 0 ] && set -- all1 noseg1 all2 noseg2
for c in "$@"; do
  case $c in
    all1) case_run all1 32 0 ;;
    noseg1) case_run noseg1 64 0 "${off_seg[@]}" ;;
    all2) case_run all2 64 0,1 ;;
    noseg2) case_run noseg2 96 0,1 "${off_seg[@]}" ;;
    *) echo "unknown case $c (all1 noseg1 all2 noseg2)"; exit 2 ;;
  esac
done
