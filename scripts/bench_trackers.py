#!/usr/bin/env python3
"""Tracker benchmark: morphoscope's component tracker against SORT and ByteTrack on the same
detections, scored with MOTA, IDF1 (motmetrics) and HOTA (TrackEval).

    scripts/bench_trackers.py [--out out/bench_trackers] [--sets tuning,held_out]

1. Builds `morphoscope` and `examples/track_scenes` (cargo, debug profile; honours
   CARGO_TARGET_DIR) unless `--morphoscope` and `--scenes-bin` are given.
2. Renders the synthetic scenes of `src/track/scenes/catalogue.rs` as H.264 videos with MOT
   ground truth (`OUT/scenes/<set>/<scene>/`), once.
3. Runs the whole pipeline on each video: `morphoscope run VIDEO --backend cpu --set
   cca.source=frame` with the other analyses off, the tracker at its defaults and the scene's
   frame rate. Its `tracks.csv` is morphoscope's answer.
4. Feeds the boxes of the same components (`components.jsonl`, those of at least
   `tracker.min_area` pixels, all of confidence 1) to SORT and ByteTrack of the `trackers`
   package (default parameters, the scene's frame rate).
5. Scores the three against the ground truth at IoU >= 0.5 (MOTA, IDF1, ID switches: motmetrics;
   HOTA: TrackEval, averaged over its IoU thresholds) per scene and per set, prints Markdown
   tables and writes `OUT/results.json`.

The Python packages live in a virtual environment `out/bench_trackers/venv` made on the first
run (pinned versions below); the script re-runs itself in it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PINS = ["trackers==2.6.0", "motmetrics==1.4.0", "trackeval==1.3.0"]
# The tracker's default `min_area`: components below it are no detections for anyone.
MIN_AREA = 25
IOU_THRESHOLD = 0.5
TRACKERS = ("morphoscope", "sort", "bytetrack")


def in_venv() -> None:
    """Re-runs this script inside `out/bench_trackers/venv` (created and filled on the first run)."""
    env_dir = ROOT / "out" / "bench_trackers" / "venv"
    python = env_dir / "bin" / "python"
    if Path(sys.prefix).resolve() == env_dir.resolve():
        return
    if not python.exists():
        print(f"creating {env_dir} with {' '.join(PINS)}", flush=True)
        venv.create(env_dir, with_pip=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PINS], check=True)
    os.execv(str(python), [str(python), *sys.argv])


def cargo_build() -> tuple[Path, Path]:
    """Builds the binary and the scene renderer; returns their paths."""
    cmd = ["cargo", "build", "--bin", "morphoscope", "--example", "track_scenes", "--message-format=json-render-diagnostics"]
    proc = subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True)
    exes = {}
    for line in proc.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
            exes[msg["target"]["name"]] = Path(msg["executable"])
    return exes["morphoscope"], exes["track_scenes"]


def read_mot(path: Path) -> dict[int, list[tuple[int, list[float]]]]:
    """MOT rows by 1-based frame: [(id, [left, top, width, height])]."""
    rows: dict[int, list[tuple[int, list[float]]]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                v = line.split(",")
                rows.setdefault(int(float(v[0])), []).append((int(float(v[1])), [float(x) for x in v[2:6]]))
    return rows


def write_mot(path: Path, rows: dict[int, list[tuple[int, list[float]]]]) -> None:
    with path.open("w") as f:
        for frame in sorted(rows):
            for tid, b in sorted(rows[frame]):
                f.write(f"{frame},{tid},{b[0]:g},{b[1]:g},{b[2]:g},{b[3]:g},1,-1,-1,-1\n")


def detections(components: Path) -> list[list[list[float]]]:
    """Per 0-based frame, the boxes [l, t, w, h] of the components of at least MIN_AREA pixels."""
    frames = []
    for line in components.read_text().splitlines():
        c = json.loads(line)["table"]["components"]
        frames.append([[x["left"], x["top"], x["width"], x["height"]] for x in c if x["area"] >= MIN_AREA])
    return frames


def run_box_tracker(name: str, dets: list[list[list[float]]], fps: float) -> dict[int, list[tuple[int, list[float]]]]:
    import numpy as np
    import supervision as sv
    from trackers import ByteTrackTracker, SORTTracker

    tracker = SORTTracker(frame_rate=fps) if name == "sort" else ByteTrackTracker(frame_rate=fps)
    rows: dict[int, list[tuple[int, list[float]]]] = {}
    for f, boxes in enumerate(dets):
        xywh = np.array(boxes, dtype=float).reshape(-1, 4)
        xyxy = np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], axis=1)
        out = tracker.update(sv.Detections(xyxy=xyxy))
        for b, tid in zip(out.xyxy, out.tracker_id):
            if tid >= 0:
                rows.setdefault(f + 1, []).append((int(tid), [b[0], b[1], b[2] - b[0], b[3] - b[1]]))
    return rows


def iou_matrix(a: list[list[float]], b: list[list[float]]):
    import numpy as np

    if not a or not b:
        return np.zeros((len(a), len(b)))
    a, b = np.array(a, dtype=float), np.array(b, dtype=float)
    ix = np.minimum(a[:, None, 0] + a[:, None, 2], b[None, :, 0] + b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
    iy = np.minimum(a[:, None, 1] + a[:, None, 3], b[None, :, 1] + b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
    inter = np.clip(ix, 0, None) * np.clip(iy, 0, None)
    union = (a[:, 2] * a[:, 3])[:, None] + (b[:, 2] * b[:, 3])[None, :] - inter
    return inter / np.maximum(union, 1e-12)


def score(gt: dict, hyp: dict, frames: int):
    """(motmetrics accumulator, TrackEval HOTA result) of one sequence."""
    import motmetrics as mm
    import numpy as np
    from trackeval.metrics import HOTA

    acc = mm.MOTAccumulator(auto_id=True)
    gt_map, hyp_map = {}, {}
    data = {"gt_ids": [], "tracker_ids": [], "similarity_scores": [], "num_timesteps": frames}
    for f in range(1, frames + 1):
        g, h = gt.get(f, []), hyp.get(f, [])
        iou = iou_matrix([b for _, b in g], [b for _, b in h])
        dist = np.where(iou >= IOU_THRESHOLD, 1.0 - iou, np.nan)
        acc.update([i for i, _ in g], [i for i, _ in h], dist)
        data["gt_ids"].append(np.array([gt_map.setdefault(i, len(gt_map)) for i, _ in g], dtype=int))
        data["tracker_ids"].append(np.array([hyp_map.setdefault(i, len(hyp_map)) for i, _ in h], dtype=int))
        data["similarity_scores"].append(iou)
    data.update(
        num_gt_ids=len(gt_map),
        num_tracker_ids=len(hyp_map),
        num_gt_dets=sum(len(x) for x in data["gt_ids"]),
        num_tracker_dets=sum(len(x) for x in data["tracker_ids"]),
    )
    hota = HOTA(config={"PRINT_CONFIG": False}).eval_sequence(data)
    return acc, hota, len(hyp_map)


def run_scene(args, morphoscope: Path, scene_dir: Path, run_dir: Path) -> dict:
    meta = json.loads((scene_dir / "scene.json").read_text())
    fps = float(meta["fps"])
    run_dir.mkdir(parents=True, exist_ok=True)
    cmd = [str(morphoscope), "run", str(scene_dir / "video.mkv"), "--out", str(run_dir), "--no-video", "--backend", "cpu", "--quiet"]
    sets = ["cca.source=frame", "maxtree.enabled=false", "orientation.enabled=false", "segmentation.enabled=false"]
    if args.frame_rate_key:
        sets.append(f"{args.frame_rate_key}={fps:g}")
    sets += args.set
    for s in sets:
        cmd += ["--set", s]
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"morphoscope failed on {scene_dir}:\n{proc.stderr}")
    dets = detections(run_dir / "components.jsonl")
    hyps = {"morphoscope": read_mot(run_dir / "tracks.csv")}
    for name in ("sort", "bytetrack"):
        hyps[name] = run_box_tracker(name, dets, fps)
        write_mot(run_dir / f"{name}.txt", hyps[name])
    gt = read_mot(scene_dir / "gt.txt")
    return {"meta": meta, "frames": len(dets), "gt": gt, "hyps": hyps}


def summarise(results: dict[str, list[dict]]) -> dict:
    """Scores per scene and per set."""
    import motmetrics as mm
    import numpy as np
    from trackeval.metrics import HOTA

    mh = mm.metrics.create()
    metrics = ["mota", "idf1", "num_switches", "num_false_positives", "num_misses", "num_objects", "num_unique_objects"]
    table = {}
    for set_name, scenes in results.items():
        table[set_name] = {}
        for tracker in TRACKERS:
            accs, hotas, names, ids = [], {}, [], 0
            per_scene = {}
            for s in scenes:
                acc, hota, n_ids = score(s["gt"], s["hyps"][tracker], s["frames"])
                name = s["meta"]["name"]
                accs.append(acc)
                names.append(name)
                hotas[name] = hota
                ids += n_ids
                per_scene[name] = {"HOTA": float(np.mean(hota["HOTA"])), "tracks": n_ids}
            summary = mh.compute_many(accs, metrics=metrics, names=names, generate_overall=True)
            for name in names:
                row = summary.loc[name]
                per_scene[name].update(MOTA=float(row["mota"]), IDF1=float(row["idf1"]), IDSW=int(row["num_switches"]), objects=int(row["num_unique_objects"]))
            overall = summary.loc["OVERALL"]
            combined = HOTA(config={"PRINT_CONFIG": False}).combine_sequences(hotas)
            table[set_name][tracker] = {
                "MOTA": float(overall["mota"]),
                "IDF1": float(overall["idf1"]),
                "HOTA": float(np.mean(combined["HOTA"])),
                "IDSW": int(overall["num_switches"]),
                "FP": int(overall["num_false_positives"]),
                "FN": int(overall["num_misses"]),
                "GT": int(overall["num_objects"]),
                "objects": int(sum(per_scene[n]["objects"] for n in names)),
                "tracks": ids,
                "scenes": per_scene,
            }
    return table


def markdown(table: dict) -> str:
    out = []
    for set_name, trackers in table.items():
        out.append(f"\n{set_name}:\n")
        out.append("| tracker | MOTA | IDF1 | HOTA | ID switches | FP | FN | tracks for objects |")
        out.append("|---|---|---|---|---|---|---|---|")
        for name, m in trackers.items():
            out.append(f"| {name} | {100 * m['MOTA']:.1f} | {100 * m['IDF1']:.1f} | {100 * m['HOTA']:.1f} | {m['IDSW']} | {m['FP']} | {m['FN']} | {m['tracks']} for {m['objects']} |")
        scenes = list(next(iter(trackers.values()))["scenes"])
        out.append(f"\n{set_name}, per scene (MOTA / IDF1 / HOTA / ID switches):\n")
        out.append("| scene | " + " | ".join(trackers) + " |")
        out.append("|---|" + "---|" * len(trackers))
        for s in scenes:
            cells = []
            for name in trackers:
                m = trackers[name]["scenes"][s]
                cells.append(f"{100 * m['MOTA']:.1f} / {100 * m['IDF1']:.1f} / {100 * m['HOTA']:.1f} / {m['IDSW']}")
            out.append(f"| {s} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=ROOT / "out" / "bench_trackers")
    p.add_argument("--sets", default="tuning,held_out", help="comma-separated: tuning, held_out")
    p.add_argument("--morphoscope", type=Path, help="a built morphoscope binary (skips the build)")
    p.add_argument("--scenes-bin", type=Path, help="a built track_scenes example (skips the build)")
    p.add_argument("--scenes", type=Path, help="rendered scenes (default OUT/scenes, rendered when missing)")
    p.add_argument("--frame-rate-key", default="tracker.frame_rate", help="setting that gets the scene's frame rate ('' for none)")
    p.add_argument("--set", action="append", default=[], help="extra morphoscope --set KEY=VALUE")
    p.add_argument("--only", default="", help="comma-separated scene names")
    args = p.parse_args()
    args.out = args.out.resolve()
    in_venv()
    if args.morphoscope and args.scenes_bin:
        morphoscope, scenes_bin = args.morphoscope, args.scenes_bin
    else:
        morphoscope, scenes_bin = cargo_build()
    scenes = args.scenes or args.out / "scenes"
    if not (scenes / "held_out").exists():
        subprocess.run([str(scenes_bin), str(scenes)], check=True)
    only = [s for s in args.only.split(",") if s]
    results = {}
    for set_name in args.sets.split(","):
        results[set_name] = []
        for scene_dir in sorted((scenes / set_name).iterdir()):
            if only and scene_dir.name not in only:
                continue
            results[set_name].append(run_scene(args, morphoscope, scene_dir, args.out / "runs" / set_name / scene_dir.name))
    table = summarise(results)
    print(markdown(table))
    info = {
        "machine": f"{platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "python": platform.python_version(),
        "packages": PINS,
        "results": table,
    }
    (args.out / "results.json").write_text(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()
