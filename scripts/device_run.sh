#!/usr/bin/env bash
# What a GPU machine runs to check and measure the project: the GPU test suite, headless runs of
# the sample clip, and the pipeline benchmarks, logs under $OUT. Prepared on a build machine:
#   ../shared/device/pack.sh --bin --test gpu        (binaries and the GStreamer runtime; the
#   segmentation benchmark of `kernels` and the GPU checks that read per-launch timer regions
#   and round stamps are in a `gpu` binary built with `--features profiling` only)
#   mkdir -p .device/data/samples && cp assets/samples/*.{jpg,png} .device/data/samples/
#   plus an H.264 constrained-baseline copy of the clip as .device/data/samples/vtest.mp4 and
#   one of its frames scaled to 1920x1080 as vtest_1080.png, and for `element` a 1080p H.264
#   copy of its first 400 frames as vtest_1080.mp4 (BENCHMARKS.md says how).
# `nvdec` and `timeline` make the 1080p copy themselves where it is missing (x264enc, carried
#   with `pack.sh --gst-tools`); `timeline` needs the Python wheel in .device/py and torch.
# Usage: bash scripts/device_run.sh [tests] [runs] [bench] [rings] [latency] [kernels] [cpu] [streams] [element] [nvdec] [timeline] [ncu] [soak N]
# (SOAK_SIZE=WxH sets the soak's frame size; `cpu` needs .device/bin/morphoscope-before)
set -uo pipefail
OUT=${OUT:-/tmp/morphoscope-out}; mkdir -p "$OUT"
export XDG_RUNTIME_DIR=/tmp/xdg; mkdir -p -m 700 "$XDG_RUNTIME_DIR"
for t in .device/*.tar.xz; do [ -f "$t" ] && tar xJf "$t" -C .device && rm -f "$t"; done
for f in .device/bin/*.xz; do [ -f "$f" ] && xz -d -f "$f"; done
r() { bash .device/run.sh "$@"; }
clip=.device/data/samples/vtest.mp4
off_seg="--set segmentation.enabled=false"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
want() { for a in "${ARGS[@]}"; do [ "$a" = "$1" ] && return 0; done; return 1; }
ARGS=("$@")

if want tests; then
  echo "== gpu tests"
  timeout 420 bash .device/run.sh gpu --test-threads=1 > "$OUT/gpu_tests.log" 2>&1; echo "rc=$?" >> "$OUT/gpu_tests.log"
  grep -E "^test .*(FAILED|panicked)|^test result|^rc=" "$OUT/gpu_tests.log" | head -30
  grep -A14 "^---- " "$OUT/gpu_tests.log" | grep -v "^note:" | head -150
fi
if want failing; then
  echo "== gpu tests named in \$FAILING"
  for t in ${FAILING:-}; do
    timeout 200 bash .device/run.sh gpu --test-threads=1 --exact "$t" > "$OUT/failing.log" 2>&1
    echo "-- $t: $(grep -E '^test result' "$OUT/failing.log")"; grep -A14 "^---- " "$OUT/failing.log" | grep -v "^note:" | head -40
  done
fi

if want runs; then
  echo "== run of the clip with the overlay video"
  timeout 120 bash .device/run.sh morphoscope run "$clip" --backend cuda --out "$OUT/run" --quiet > "$OUT/run.log" 2>&1; echo "rc=$?" >> "$OUT/run.log"
  grep -E "frames:|encoder|decoder|^rc=|error" "$OUT/run.log"; grep -E "latency|compose|download|compute_total" "$OUT/run.log"
  echo "== the overlay video decodes back (frames, rate)"
  timeout 60 bash .device/run.sh morphoscope run "$OUT/run/overlay.mkv" --backend cuda --no-video --quiet --set maxtree.enabled=false --set cca.enabled=false --set orientation.enabled=false $off_seg --out /tmp/decoded 2>&1 | grep -E "frames:|error"
  grep -o '"frame_rate[^,]*' "$OUT/run/timings.json" /tmp/decoded/timings.json 2>/dev/null | head -4
  echo "== run of the clip, no video"
  timeout 60 bash .device/run.sh morphoscope run "$clip" --backend cuda --no-video --quiet --out /tmp/run_novideo > "$OUT/run_novideo.log" 2>&1
  grep -E "frames:" "$OUT/run_novideo.log"
  cp "$OUT/run/timings.json" "$OUT/run_timings.json"; rm -rf "$OUT/run"
fi

bench() { # name, args...
  local name=$1; shift
  timeout 120 bash .device/run.sh morphoscope bench --source "$clip" --backends cuda --json "$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1
  echo "-- $name: $*"; grep -E "compute \(sum|pipeline \(wall|video sink|error" "$OUT/$name.log"
}
if want bench; then
  echo "== bench (pipeline from memory, 1080p and 4K)"
  bench b1080 --size 1920x1080 --frames 100
  bench b1080_noseg --size 1920x1080 --frames 100 $off_seg
  bench b4k --size 3840x2160 --frames 60
  bench b4k_noseg --size 3840x2160 --frames 60 $off_seg
  bench b1080_picture --size 1920x1080 --frames 100 --sink picture
  bench b1080_video --size 1920x1080 --frames 100 --sink video
fi
if want rings; then
  # RING_SIZES, RING_FRAME_SIZES and RING_ARGS (e.g. "--sms 8") choose the grid.
  echo "== ring size (all four)"
  for size in ${RING_FRAME_SIZES:-1920x1080}; do for n in ${RING_SIZES:-2 3 4 6}; do
    bench "ring${n}_$size" --size "$size" --frames 100 --set pipeline.ring_size=$n ${RING_ARGS:-}
  done; done
fi
if want latency; then
  echo "== latency of a live source paced at 30 fps (test pattern in real time)"
  for size in "1920 1080" "3840 2160"; do
    set -- $size
    timeout 60 bash .device/run.sh morphoscope run test:ball --backend cuda --no-video --quiet --out /tmp/lat \
      --set source.pacing=realtime --set source.test.width=$1 --set source.test.height=$2 --set source.test.frames=300 --set source.test.fps=30 > "$OUT/latency_$1.log" 2>&1
    echo "-- ${1}x$2"; grep -E "frames:|^latency|^queue_wait" "$OUT/latency_$1.log"
  done
fi
if want kernels; then
  echo "== kernel benchmarks (compose, segmentation)"
  timeout 200 bash .device/run.sh gpu --ignored --nocapture --test-threads=1 bench_compose > "$OUT/bench_compose.log" 2>&1; tail -25 "$OUT/bench_compose.log"
  SEGMENTATION_BENCH_RUNS=21 timeout 240 bash .device/run.sh gpu --ignored --nocapture --test-threads=1 bench_segmentation > "$OUT/bench_segmentation.log" 2>&1; grep -vE "^\s*$" "$OUT/bench_segmentation.log" | tail -25
fi
if want soak; then
  n=${ARGS[-1]}
  echo "== soak: $n frames of a ${SOAK_SIZE:-1920x1080} test source, all four analyses"
  MORPHOSCOPE="bash .device/run.sh morphoscope" timeout 560 bash scripts/soak.sh "$n" --size "${SOAK_SIZE:-1920x1080}" --out "$OUT/soak" > "$OUT/soak.log" 2>&1; tail -15 "$OUT/soak.log"
fi
if want cpu; then
  # The CPU backend before and after the device-resident frame path, on the same frames: the
  # binary of the earlier version is carried as .device/bin/morphoscope-before.
  # CPU_ROUNDS (default 1) alternates the two binaries that many times, so that a drift of the
  # host shows as a spread rather than as a difference.
  echo "== CPU backend: earlier version against this one (clip frames, 768x576, all four)"
  for round in $(seq "${CPU_ROUNDS:-1}"); do for prog in morphoscope-before morphoscope; do
    timeout 150 bash .device/run.sh $prog bench --source "$clip" --size 768x576 --frames 60 --backends cpu > "$OUT/cpu_bench_${prog}_$round.log" 2>&1
    echo "-- $prog bench (round $round)"; grep -E "compute \(sum|pipeline \(wall|fps|error" "$OUT/cpu_bench_${prog}_$round.log" | head -8
  done; done
  for prog in morphoscope-before morphoscope; do
    t0=$(date +%s.%N)
    timeout 150 bash .device/run.sh $prog run "$clip" --backend cpu --no-video --quiet --max-frames 200 --out /tmp/cpu_run_$prog > "$OUT/cpu_run_$prog.log" 2>&1
    echo "-- $prog run --backend cpu --no-video: $(awk "BEGIN{print $(date +%s.%N) - $t0}") s wall"; grep -E "frames:|error" "$OUT/cpu_run_$prog.log"
  done
fi
if want streams; then
  # Live 1080p streams at 30 fps, one trial per count (STREAM_TRIALS="case:N ..."; cases all1,
  # noseg1 on GPU 0 and all2, noseg2 over GPUs 0 and 1). The sweep (scripts/bench_streams.sh)
  # searches from 1; these trials bracket the answer in less device time.
  echo "== many streams: live 1080p at 30 fps, no frame dropped after the warm-up"
  for t in ${STREAM_TRIALS:-all1:8 noseg1:16}; do
    c=${t%:*}; n=${t#*:}; dev=0; extra=()
    case $c in *2) dev=0,1 ;; esac
    case $c in noseg*) extra=($off_seg) ;; esac
    timeout 100 bash .device/run.sh morphoscope bench --source "$clip" --size 1920x1080 --frames 30 --warmup 60 \
      --fps 30 --seconds 10 --streams "$n" --backend cuda --device "$dev" "${extra[@]}" \
      --json "$OUT/streams_${c}_$n.json" > "$OUT/streams_${c}_$n.log" 2>&1
    echo "-- $c, $n streams (rc=$?): $(grep -E "streams at .* fps:" "$OUT/streams_${c}_$n.log" | tail -1)"
  done
fi
if want element; then
  # The GStreamer element against `morphoscope run` on the same clip (NVDEC decode, tables only):
  # the sample clip (768x576) and, where carried, a 1080p H.264 copy (vtest_1080.mp4).
  for c in $clip .device/data/samples/vtest_1080.mp4; do
    [ -f "$c" ] || continue
    tag=$(basename "$c" .mp4)
    echo "== element: nvh264dec ! morphoscope ! fakesink against morphoscope run ($c)"
    t0=$(date +%s.%N)
    timeout 120 bash .device/run.sh morphoscope run "$c" --backend cuda --no-video --quiet --out /tmp/el_run > "$OUT/element_run_$tag.log" 2>&1
    echo "-- morphoscope run --no-video: $(awk "BEGIN{print $(date +%s.%N) - $t0}") s wall; $(grep -E "frames:" "$OUT/element_run_$tag.log")"
    dec="filesrc location=$c ! qtdemux ! h264parse ! nvh264dec"
    el() { # NAME DESCRIPTION: one timed pipeline through the element
      timeout 120 bash .device/run.sh throughput "$2" > "$OUT/element_${tag}_$1.log" 2>&1
      echo "-- $1 (rc=$?): $2"; tail -3 "$OUT/element_${tag}_$1.log"
    }
    # The pipeline of the issue: decoder straight into the element (NV12 in CUDA memory).
    el cuda "$dec ! morphoscope name=m backend=cuda ! fakesink sync=false"
    el cuda_draw "$dec ! morphoscope name=m backend=cuda draw=true ! fakesink sync=false"
    # The decoder's frames kept in system memory (the element converts NV12 on the host).
    el system_nv12 "$dec ! video/x-raw,format=NV12 ! morphoscope name=m backend=cuda ! fakesink sync=false"
    # RGB from videoconvert, as run's source gives it.
    el system_rgb "$dec ! videoconvert ! video/x-raw,format=RGB ! morphoscope name=m backend=cuda ! fakesink sync=false"
    # A queue in front: decoder and element on separate streaming threads.
    el cuda_queue "$dec ! queue ! morphoscope name=m backend=cuda ! fakesink sync=false"
  done
  dec="filesrc location=$clip ! qtdemux ! h264parse ! nvh264dec"
  # An earlier build of the element (.device/libgstmorphoscope-before.so), same pipeline.
  if [ -f .device/libgstmorphoscope-before.so ]; then
    rm -rf /tmp/gst-before && cp -r .device/gst /tmp/gst-before && cp .device/libgstmorphoscope-before.so /tmp/gst-before/libgstmorphoscope.so
    GST_PLUGIN_SYSTEM_PATH=/tmp/gst-before GST_PLUGIN_PATH=/tmp/gst-before GST_REGISTRY=/tmp/gst-registry-before.bin \
      GST_PLUGIN_SCANNER=$PWD/.device/gst-plugin-scanner LD_LIBRARY_PATH=$PWD/.device/lib \
      timeout 120 .device/bin/throughput "$dec ! morphoscope name=m backend=cuda ! fakesink sync=false" > "$OUT/element_before.log" 2>&1
    echo "-- element, earlier build (rc=$?):"; tail -4 "$OUT/element_before.log"
  fi
  if [ -x .device/bin/element_gpu ]; then
    echo "== the element's GPU tests"
    timeout 200 bash .device/run.sh element_gpu --test-threads=1 > "$OUT/element_gpu.log" 2>&1; echo "rc=$?" >> "$OUT/element_gpu.log"
    grep -E "^test |^test result|^rc=|panicked" "$OUT/element_gpu.log" | head -20
  fi
  t0=$(date +%s.%N)
  timeout 120 bash .device/run.sh gst-launch-1.0 -e filesrc location=$clip ! qtdemux ! h264parse ! nvh264dec ! morphoscope backend=cuda ! fakesink sync=false > "$OUT/element_launch.log" 2>&1
  echo "-- gst-launch (rc=$?): $(awk "BEGIN{print $(date +%s.%N) - $t0}") s wall"; tail -2 "$OUT/element_launch.log"
fi
clip1080=.device/data/samples/vtest_1080.mp4
make_clip1080() { # the clip scaled to 1080p as H.264 constrained baseline, all 795 frames
  [ -f "$clip1080" ] && return
  timeout 120 bash .device/run.sh gst-launch-1.0 -q filesrc location=$clip ! qtdemux ! h264parse ! nvh264dec ! videoconvert ! videoscale \
    ! video/x-raw,width=1920,height=1080 ! x264enc speed-preset=faster bitrate=8000 key-int-max=30 ! video/x-h264,profile=constrained-baseline \
    ! h264parse ! mp4mux ! filesink location=$clip1080 > "$OUT/clip1080.log" 2>&1 || tail -3 "$OUT/clip1080.log"
}
fps_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["fps"])' "$1" 2>/dev/null || echo "?"; }
if want nvdec; then
  # `run` of a 1080p H.264 file against the bench on the same clip: NVDEC frames read in CUDA
  # memory (the file source), the same decoding handed over in system memory (a pipeline
  # description, as every source was before), and the bench's frames from memory.
  make_clip1080
  echo "== run of a 1080p H.264 file (--no-video) against the bench on the same clip"
  uri="file://$(realpath "$clip1080")"
  for round in 1 2; do
    timeout 120 bash .device/run.sh morphoscope run "$clip1080" --backend cuda --no-video --quiet --out /tmp/nv_dev > "$OUT/nvdec_run_device_$round.log" 2>&1
    echo "-- run, CUDA memory (round $round): $(fps_of /tmp/nv_dev/timings.json) fps; $(grep -o '"frame_memory": *"[a-z]*"' /tmp/nv_dev/timings.json) $(grep -o '"decoder": *"[a-z0-9]*"' /tmp/nv_dev/timings.json)"
    timeout 120 bash .device/run.sh morphoscope run "uridecodebin uri=\"$uri\" ! videoconvert n-threads=4 ! appsink name=sink" --backend cuda --no-video --quiet --out /tmp/nv_sys > "$OUT/nvdec_run_system_$round.log" 2>&1
    echo "-- run, system memory (round $round): $(fps_of /tmp/nv_sys/timings.json) fps; $(grep -o '"frame_memory": *"[a-z]*"' /tmp/nv_sys/timings.json)"
    timeout 120 bash .device/run.sh morphoscope bench --source "$clip1080" --backends cuda --frames 300 > "$OUT/nvdec_bench_$round.log" 2>&1
    echo "-- bench, same clip (round $round): $(grep -E "pipeline \(wall" "$OUT/nvdec_bench_$round.log")"
  done
  cp /tmp/nv_dev/timings.json "$OUT/nvdec_run_timings.json"
fi
if want timeline; then
  # The kernel timeline (CUPTI through torch's profiler; scripts/profile_timeline.py) of the
  # 1080p clip with every analysis, on all SMs and on 8 (TIMELINE_SOURCE: another SOURCE).
  make_clip1080
  src=${TIMELINE_SOURCE:-$clip1080}
  mkdir -p /tmp/site && python3 -m pip install -q --no-deps --target /tmp/site .device/py/*.whl > /dev/null 2>&1
  for c in "all:" "sms8:--set pipeline.sm_limit=8" "noseg:--set segmentation.enabled=false"; do
    label=${c%%:*}; args=${c#*:}
    PYTHONPATH=/tmp/site timeout 150 bash .device/run.sh python3 scripts/profile_timeline.py "$src" --frames ${TIMELINE_FRAMES:-200} \
      --label "$label" --out "$OUT/timeline" $args > "$OUT/timeline_$label.log" 2>&1
    echo "-- timeline $label (rc=$?)"; tail -45 "$OUT/timeline_$label.log"
  done
  rm -f "$OUT"/timeline/*.trace.json
fi
if want ncu; then
  # Nsight Compute on the heaviest kernels of a 1080p frame (what bounds each); the cooperative
  # segmentation_cat_giant is left out (it cannot be replayed alone).
  ncu=/usr/local/cuda/bin/ncu
  for c in "other:^(maxtree|orientation|cca|preprocess|blur)" "seg:^segmentation_(?!cat_giant)"; do
    label=${c%%:*}; re=${c#*:}
    timeout 200 bash .device/run.sh $ncu --kernel-name "regex:$re" --launch-skip 400 --launch-count ${NCU_KERNELS:-60} \
      --section SpeedOfLight --section Occupancy --section LaunchStats --csv --page details \
      .device/bin/morphoscope bench --source "$clip" --size 1920x1080 --frames 20 --warmup 2 --backends cuda > "$OUT/ncu_$label.csv" 2>"$OUT/ncu_$label.err"
    echo "-- ncu $label (rc=$?): $(wc -l < "$OUT/ncu_$label.csv") lines"; tail -3 "$OUT/ncu_$label.err"
  done
fi
# Everything back as one archive (the device tool returns at most 8 files).
(cd "$OUT" && tar czf /tmp/logs.tgz --exclude=logs.tgz . && find . -mindepth 1 -delete && mv /tmp/logs.tgz logs.tgz)
