#!/usr/bin/env python3
"""Kernel timeline of the GPU pipeline, in place of Nsight Systems.

Nsight Systems is not installed on the GPU machine. PyTorch's profiler records the same kernel
timeline: Kineto drives CUPTI's activity API, which sees every CUDA kernel, copy and memset of
the process, those that morphoscope's Rust extension launches through the driver API included.
This script runs `morphoscope.open` on a video with CUDA under that profiler and reduces the
trace to what the pipeline's scheduling needs: how busy the GPU is, how many kernels overlap,
what each analysis launches a frame and for how long, and the idle gaps on each stream.

    scripts/profile_timeline.py VIDEO [--frames 300] [--warmup 30] [--set KEY=VALUE ...]
                                [--label TEXT] [--out DIR]
    scripts/profile_timeline.py --analyse DIR/LABEL.trace.json [--out DIR]

- Capture (needs torch with CUDA, and the morphoscope wheel): `--set` entries go to
  `morphoscope.open(settings={key: value})` as `run --set key=value` does (values are passed
  as strings, e.g. `--set pipeline.sm_limit=8 --set segmentation.downscale=2`). The first
  `--warmup` frames are read outside the profiler (kernels compiled, buffers allocated), the
  next `--frames` inside it (CPU and CUDA activities: CPU keeps Kineto active, the CUDA kernels
  are what is analysed), timed by wall clock. The stream analyses a few frames ahead of the
  reader (the reader's channel and the ring of CUDA streams), so it is opened with a margin
  of frames past the profiled ones and closed after the profiler stops: the window then holds
  steady-state work at both ends, and per-frame figures are not biased by frames analysed
  before the profiler started. Writes `DIR/LABEL.trace.json` (Kineto's chrome trace, with
  a `morphoscope_profile` entry: frames, wall time, settings) and `DIR/LABEL.summary.json`,
  and prints the summary. LABEL defaults to the video's name.
- `--analyse TRACE`: only the analysis of a written trace (standard library only: no torch,
  no GPU); frames and wall time come from its `morphoscope_profile` entry (else `--frames`).

Analysis (times in µs, as in the trace): kernels are the events of `cat` "kernel"; their
stream is `args.stream` (else `tid`); "gpu_memcpy"/"gpu_memset" events are counted apart.
Groups by name prefix: maxtree -> max-tree, cca -> CCA, orientation, segmentation/blur ->
segmentation, compose, nv12/preprocess/convert -> input, the rest -> other.
- GPU: busy fraction = union of the kernel intervals / (last end - first start); concurrency =
  sum of durations / union (kernels running at once while the GPU is busy).
- Per group: launches and kernel µs per frame, median and p90 duration, share under 10 µs.
- Per stream: busy fraction of its own span; gaps between consecutive kernels (start minus
  the latest end before it, 0 if overlapping): median, p90, sum per frame.
- Top 15 kernels by total time. Percentiles interpolate linearly between ranks (numpy's
  default).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

# Frames the stream is opened for past the profiled ones (it analyses a few ahead of the reader).
AHEAD_MARGIN = 16
SHORT_US = 10.0
TOP = 15
# (prefixes, group), first match wins.
GROUPS = (
    (("maxtree",), "max-tree"),
    (("cca",), "CCA"),
    (("orientation",), "orientation"),
    (("segmentation", "blur"), "segmentation"),
    (("compose",), "compose"),
    (("nv12", "preprocess", "convert"), "input"),
)
GROUP_ORDER = ("input", "max-tree", "CCA", "orientation", "segmentation", "compose", "other")
MEMOPS = {"gpu_memcpy": "gpu_memcpy", "memcpy": "gpu_memcpy",
          "gpu_memset": "gpu_memset", "memset": "gpu_memset"}


def group_of(name: str) -> str:
    """The analysis a kernel belongs to, from its name's prefix."""
    n = name.lower()
    if n.startswith("void "):
        n = n[5:]
    for prefixes, group in GROUPS:
        if n.startswith(prefixes):
            return group
    return "other"


def gpu_events(trace) -> tuple[list[dict], dict[str, dict]]:
    """Kernel records ``{name, ts, dur, stream}`` of a chrome trace (a dict with
    ``traceEvents`` or a bare event list), and ``{"gpu_memcpy"|"gpu_memset": {count, us}}``."""
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    kernels, memops = [], {}
    for e in events:
        if e.get("ph", "X") != "X" or "dur" not in e:
            continue
        cat = str(e.get("cat", "")).lower()
        if cat == "kernel":
            args = e.get("args") or {}
            stream = args.get("stream", e.get("tid"))
            kernels.append({"name": e.get("name", "?"), "ts": float(e["ts"]),
                            "dur": float(e["dur"]), "stream": str(stream)})
        elif cat in MEMOPS:
            m = memops.setdefault(MEMOPS[cat], {"count": 0, "us": 0.0})
            m["count"] += 1
            m["us"] += float(e["dur"])
    return kernels, memops


def percentile(values, p: int):
    """The ``p``-th percentile (integer percent) by linear interpolation between ranks, as
    numpy's default; None for no values."""
    a = sorted(values)
    if not a:
        return None
    lo, r = divmod(p * (len(a) - 1), 100)
    if r == 0:
        return a[lo]
    return (a[lo] * (100 - r) + a[lo + 1] * r) / 100


def union_length(intervals) -> float:
    """Total length covered by the ``(start, end)`` intervals."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def _ratio(a, b):
    return a / b if b else None


def stream_stats(kernels: list[dict], frames: int) -> dict:
    """Busy fraction and inter-kernel gaps of the kernels of one stream."""
    ks = sorted(kernels, key=lambda k: k["ts"])
    span = max(k["ts"] + k["dur"] for k in ks) - ks[0]["ts"]
    gaps, end = [], ks[0]["ts"] + ks[0]["dur"]
    for k in ks[1:]:
        gaps.append(max(0.0, k["ts"] - end))
        end = max(end, k["ts"] + k["dur"])
    return {
        "launches": len(ks),
        "span_us": span,
        "busy_fraction": _ratio(union_length((k["ts"], k["ts"] + k["dur"]) for k in ks), span),
        "median_gap_us": percentile(gaps, 50),
        "p90_gap_us": percentile(gaps, 90),
        "gap_us_per_frame": sum(gaps) / frames,
    }


def analyse(kernels: list[dict], frames: int, wall_s=None, memops=None) -> dict:
    """The summary of kernel records (see :func:`gpu_events`) over ``frames`` profiled frames
    taking ``wall_s`` seconds."""
    frames = max(1, int(frames))
    out = {"frames": frames, "wall_s": wall_s,
           "fps": frames / wall_s if wall_s else None, "kernels": len(kernels)}
    out["memops"] = {k: {"count": v["count"], "per_frame": v["count"] / frames,
                         "us_per_frame": v["us"] / frames} for k, v in (memops or {}).items()}
    if not kernels:
        return out
    intervals = [(k["ts"], k["ts"] + k["dur"]) for k in kernels]
    span = max(e for _, e in intervals) - min(s for s, _ in intervals)
    busy = union_length(intervals)
    total = sum(k["dur"] for k in kernels)
    out["kernel_us_per_frame"] = total / frames
    out["gpu"] = {"span_us": span, "busy_us": busy, "busy_fraction": _ratio(busy, span),
                  "mean_concurrency": _ratio(total, busy)}

    by_group, by_stream, by_name = defaultdict(list), defaultdict(list), defaultdict(list)
    for k in kernels:
        by_group[group_of(k["name"])].append(k["dur"])
        by_stream[k["stream"]].append(k)
        by_name[k["name"]].append(k["dur"])
    out["groups"] = {
        g: {"launches": len(d), "launches_per_frame": len(d) / frames,
            "kernel_us_per_frame": sum(d) / frames, "median_us": percentile(d, 50),
            "p90_us": percentile(d, 90),
            "short_share": sum(1 for x in d if x < SHORT_US) / len(d)}
        for g in GROUP_ORDER if (d := by_group.get(g))
    }
    out["streams"] = {s: stream_stats(ks, frames)
                      for s, ks in sorted(by_stream.items(), key=lambda kv: -len(kv[1]))}
    top = sorted(by_name.items(), key=lambda kv: (-sum(kv[1]), kv[0]))[:TOP]
    out["top_kernels"] = [{"name": n, "count": len(d), "total_ms": sum(d) / 1000,
                           "mean_us": sum(d) / len(d)} for n, d in top]
    return out


def format_summary(s: dict) -> str:
    """A compact text table of a summary from :func:`analyse`."""
    f = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    lines = [f"frames {s['frames']}  wall {f(s['wall_s'], '.3f')} s  fps {f(s['fps'], '.1f')}"
             f"  kernels {s['kernels']}"]
    if "gpu" in s:
        g = s["gpu"]
        lines.append(f"GPU busy {f(g['busy_fraction'], '.1%')} of {g['span_us'] / 1e3:.1f} ms"
                     f"  concurrency {f(g['mean_concurrency'], '.2f')}"
                     f"  kernel time {s['kernel_us_per_frame']:.0f} us/frame")
        lines.append(f"\n{'group':<13}{'launch/fr':>10}{'us/fr':>10}{'med us':>9}"
                     f"{'p90 us':>9}{'<10us':>8}")
        for name, r in s["groups"].items():
            lines.append(f"{name:<13}{r['launches_per_frame']:>10.1f}"
                         f"{r['kernel_us_per_frame']:>10.1f}{r['median_us']:>9.1f}"
                         f"{r['p90_us']:>9.1f}{r['short_share']:>8.0%}")
        lines.append(f"\n{'stream':<8}{'launches':>9}{'busy':>7}{'med gap':>9}{'p90 gap':>9}"
                     f"{'gap us/fr':>11}")
        for name, r in s["streams"].items():
            lines.append(f"{name:<8}{r['launches']:>9}{f(r['busy_fraction'], '.0%'):>7}"
                         f"{f(r['median_gap_us'], '.1f'):>9}{f(r['p90_gap_us'], '.1f'):>9}"
                         f"{r['gap_us_per_frame']:>11.1f}")
        lines.append(f"\n{'kernel':<36}{'count':>8}{'total ms':>10}{'mean us':>9}")
        for r in s["top_kernels"]:
            lines.append(f"{r['name'][:35]:<36}{r['count']:>8}{r['total_ms']:>10.3f}"
                         f"{r['mean_us']:>9.1f}")
    for k, m in s.get("memops", {}).items():
        lines.append(f"{k}: {m['count']} ({m['per_frame']:.1f}/frame,"
                     f" {m['us_per_frame']:.1f} us/frame)")
    return "\n".join(lines)


def capture(video: str, frames: int, warmup: int, settings: dict, trace_path: Path):
    """Profiles ``frames`` frames of ``video`` after ``warmup`` unprofiled ones; writes the
    chrome trace and returns ``(profiled frames, wall seconds)``."""
    import morphoscope
    import torch
    from torch.profiler import ProfilerActivity, profile

    if not torch.cuda.is_available():
        sys.exit("torch sees no CUDA device")
    torch.cuda.init()
    with morphoscope.open(video, settings=settings, device="cuda",
                          max_frames=warmup + frames + AHEAD_MARGIN) as stream:
        for _ in range(warmup):
            if next(stream, None) is None:
                sys.exit(f"{video} ended during the {warmup} warm-up frames")
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            start, n = time.perf_counter(), 0
            while n < frames and next(stream, None) is not None:
                n += 1
            wall = time.perf_counter() - start
            torch.cuda.synchronize()
    if n == 0:
        sys.exit(f"{video} ended before the profiled frames")
    prof.export_chrome_trace(str(trace_path))
    return n, wall


def main(argv=None) -> None:
    """Command line: capture and analyse, or ``--analyse`` a written trace."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("video", nargs="?", metavar="VIDEO")
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="sets")
    ap.add_argument("--label")
    ap.add_argument("--out")
    ap.add_argument("--analyse", metavar="TRACE.json")
    a = ap.parse_args(argv)
    if (a.video is None) == (a.analyse is None):
        ap.error("give VIDEO, or --analyse TRACE.json")
    if a.frames < 1 or a.warmup < 0:
        ap.error("--frames at least 1, --warmup at least 0")

    if a.analyse:
        trace_path = Path(a.analyse)
        label = a.label or trace_path.name.removesuffix(".json").removesuffix(".trace")
        out = Path(a.out) if a.out else trace_path.parent
        trace = json.loads(trace_path.read_text())
        meta = trace.get("morphoscope_profile", {}) if isinstance(trace, dict) else {}
        frames, wall = meta.get("frames", a.frames), meta.get("wall_s")
    else:
        settings = {}
        for s in a.sets:
            key, eq, value = s.partition("=")
            if not eq or not key:
                ap.error(f"--set {s!r}: KEY=VALUE")
            settings[key.strip()] = value
        label = a.label or Path(a.video).stem
        out = Path(a.out or ".")
        out.mkdir(parents=True, exist_ok=True)
        trace_path = out / f"{label}.trace.json"
        frames, wall = capture(a.video, a.frames, a.warmup, settings, trace_path)
        trace = json.loads(trace_path.read_text())
        video = os.path.abspath(a.video) if os.path.exists(a.video) else a.video
        meta = {"video": video, "settings": settings, "frames": frames,
                "warmup": a.warmup, "wall_s": wall, "label": label}
        trace["morphoscope_profile"] = meta
        trace_path.write_text(json.dumps(trace))

    kernels, memops = gpu_events(trace)
    summary = {"label": label, "trace": str(trace_path), "video": meta.get("video"),
               "settings": meta.get("settings"), **analyse(kernels, frames, wall, memops)}
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{label}.summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"{label}: {trace_path}")
    print(format_summary(summary))


if __name__ == "__main__":
    main()
