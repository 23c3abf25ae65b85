#!/usr/bin/env bash
# What one GPU-machine session runs (see README "Development"): every GPU test, a headless CUDA
# run of the sample clip, and the pipeline benchmark at 1080p and 4K, logs under $OUT.
# Prepared here with:
#   ../shared/device/pack.sh --bin --test gpu && strip -s .device/bin/* && xz -T0 .device/bin/*
#   mkdir -p .device/data/samples && cp assets/samples/*.{jpg,png} .device/data/samples/
#   (plus an H.264 constrained-baseline copy of vtest.avi as .device/data/samples/vtest.mp4)
set -uo pipefail
OUT=${OUT:-/tmp/morphoscope-out}; mkdir -p "$OUT"
for f in .device/bin/*.xz; do [ -f "$f" ] && xz -d -f "$f"; done
r() { bash .device/run.sh "$@"; }
clip=.device/data/samples/vtest.mp4
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
echo "== gpu tests"; timeout 200 bash .device/run.sh gpu --test-threads=1 > "$OUT/gpu_tests.log" 2>&1; echo "rc=$?" >> "$OUT/gpu_tests.log"
tail -3 "$OUT/gpu_tests.log"
echo "== run"; timeout 60 bash .device/run.sh morphoscope run "$clip" --backend cuda --out "$OUT/run" > "$OUT/run.log" 2>&1; echo "rc=$?" >> "$OUT/run.log"
grep frames: "$OUT/run.log"; tail -32 "$OUT/run.log"
off="--set maxtree.enabled=false --set cca.enabled=false --set orientation.enabled=false --set segmentation.enabled=false"
echo "== overlay.mkv decodes"; timeout 30 bash .device/run.sh morphoscope run "$OUT/run/overlay.mkv" --backend cuda --no-video $off --out /tmp/decoded 2>&1 | grep frames:
if [ "${RING_SIZES:-0}" = 1 ]; then
for n in 4 6; do
  echo "== run, ring of $n"; timeout 60 bash .device/run.sh morphoscope run "$clip" --backend cuda --no-video --set pipeline.ring_size=$n --out /tmp/run$n > "$OUT/run$n.log" 2>&1; grep -E "frames:|segment_merge|download|compute_total" "$OUT/run$n.log"
done
fi
echo "== bench 1080p cuda"; timeout 90 bash .device/run.sh morphoscope bench --source "$clip" --size 1920x1080 --frames 30 --backends cuda --json "$OUT/bench1080.json" > "$OUT/bench1080.log" 2>&1
tail -40 "$OUT/bench1080.log"
echo "== bench 1080p cuda, no segmentation"; timeout 40 bash .device/run.sh morphoscope bench --source "$clip" --size 1920x1080 --frames 100 --backends cuda --set segmentation.enabled=false --json "$OUT/bench1080noseg.json" > "$OUT/bench1080noseg.log" 2>&1
tail -40 "$OUT/bench1080noseg.log"
echo "== bench 4K cuda, no segmentation"; timeout 60 bash .device/run.sh morphoscope bench --source "$clip" --size 3840x2160 --frames 60 --backends cuda --set segmentation.enabled=false --json "$OUT/bench4k.json" > "$OUT/bench4k.log" 2>&1
tail -40 "$OUT/bench4k.log"
cp "$OUT/run/timings.json" "$OUT/run_timings.json"; rm -f "$OUT/run/components.jsonl" "$OUT/run/overlay.mkv" "$OUT/run/tracks.csv" "$OUT/run/timings.json"
