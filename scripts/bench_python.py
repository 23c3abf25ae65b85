#!/usr/bin/env python3
"""Benchmark of the Python package: each function of `morphoscope` at 1080p and 4K against
scikit-image (CPU) and, where it has the function, cuCIM (`cucim.skimage`, CUDA), and the Python
call's overhead over the library op it runs.

    scripts/bench_python.py [--sizes 1920x1080,3840x2160] [--device auto] [--json OUT.json]

- Images: the sample pictures (`assets/samples`, or `$MORPHOSCOPE_DATA/samples`) mirror-tiled to
  the frame size: grey uint8 for the filters and the orientation, RGB for Felzenszwalb, the mask
  `grey > 128` for `label`, its labels for `regionprops_table`.
- Each case: one warm-up call (kernels compiled, buffers allocated), then the median wall time
  of `--reps` calls (scikit-image: its first call when it takes over 0.3 s, else the median
  of 3). morphoscope is timed
  with NumPy in and out, and with CuPy arrays in and out when CuPy is present and the device is
  CUDA. cuCIM calls are followed by a device synchronisation.
- Overhead: morphoscope's call time minus the op's own wall time inside the extension
  (`morphoscope._core.last_op_seconds()`: from the input view to the result), as a share of the
  call (the target is <= 5 % at 1080p).
- Every morphoscope result is checked against scikit-image's before timing (equal arrays;
  Felzenszwalb's segment count within 1 %, exact ties aside: docs/python.md).

Prints a Markdown table, a row as soon as it is measured, and writes the figures as JSON with
`--json` (rewritten after each row). scikit-image's max-tree takes seconds a call at 1080p and
tens of seconds at 4K: `--no-skimage` leaves it out of a run (e.g. 4K on the GPU machine).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def samples_dir() -> Path:
    env = os.environ.get("MORPHOSCOPE_DATA")
    return Path(env) / "samples" if env else ROOT / "assets" / "samples"


def tiled(img: np.ndarray, height: int, width: int) -> np.ndarray:
    """`img` mirror-tiled (reflected copies) to `height` x `width`."""
    reps_y = -(-height // img.shape[0])
    reps_x = -(-width // img.shape[1])
    rows = [img if i % 2 == 0 else img[::-1] for i in range(reps_y)]
    col = np.concatenate(rows, axis=0)
    cols = [col if j % 2 == 0 else col[:, ::-1] for j in range(reps_x)]
    return np.ascontiguousarray(np.concatenate(cols, axis=1)[:height, :width])


def inputs(height: int, width: int) -> dict:
    from skimage import io

    rgb = io.imread(samples_dir() / "fruits.jpg")[..., :3]
    rgb = tiled(rgb, height, width)
    grey = np.round(rgb @ np.array([0.299, 0.587, 0.114])).astype(np.uint8)
    return {"rgb": rgb, "grey": grey, "mask": grey > 128}


def median_seconds(call, reps: int, sync=None) -> float:
    call()
    if sync:
        sync()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        call()
        if sync:
            sync()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def cases(img: dict, device: str):
    """(name, morphoscope call, scikit-image call, cuCIM call or None, input key, exact)."""
    import skimage.measure as skmeasure
    import skimage.morphology as skm
    import skimage.segmentation as sks

    import morphoscope.measure as msmeasure
    import morphoscope.morphology as msm
    import morphoscope.orientation as mso
    import morphoscope.segmentation as mss

    try:
        import cucim.skimage.measure as cumeasure
        import cucim.skimage.morphology as cum
    except ImportError:
        cumeasure = cum = None
    line = np.ones((1, 15), bool)
    cupy_line = None
    if cum is not None:
        import cupy

        cupy_line = cupy.asarray(line)
    labels = skmeasure.label(img["mask"])
    props = ("label", "area", "bbox", "centroid")
    return [
        ("area_opening(64)", lambda x: msm.area_opening(x, 64, device=device),
         lambda x: skm.area_opening(x, 64), None, "grey", True),
        ("area_closing(64)", lambda x: msm.area_closing(x, 64, device=device),
         lambda x: skm.area_closing(x, 64), None, "grey", True),
        ("diameter_opening(8)", lambda x: msm.diameter_opening(x, 8, device=device),
         lambda x: skm.diameter_opening(x, 8), None, "grey", True),
        ("max_tree", lambda x: msm.max_tree(x, device=device)[0],
         lambda x: skm.max_tree(x)[0], None, "grey", True),
        ("label", lambda x: msmeasure.label(x, device=device),
         skmeasure.label, cumeasure and cumeasure.label, "mask", True),
        ("regionprops_table", lambda x: msmeasure.regionprops_table(x, properties=props,
                                                                    device=device)["area"],
         lambda x: skmeasure.regionprops_table(x, properties=props)["area"],
         cumeasure and (lambda x: cumeasure.regionprops_table(x, properties=props)["area"]),
         "labels", True),
        ("linear_opening(15, 0°)", lambda x: mso.linear_opening(x, 15, 0, device=device),
         lambda x: skm.opening(x, line, mode="ignore"),
         cum and (lambda x: cum.opening(x, cupy_line)), "grey", True),
        ("orientation_map(15, 36)", lambda x: mso.orientation_map(x, 15, 36, device=device)[0],
         None, None, "grey", True),
        ("felzenszwalb(100)", lambda x: mss.felzenszwalb(x, 100, 0.8, 20, device=device),
         lambda x: sks.felzenszwalb(x, 100, 0.8, 20), None, "rgb", False),
    ], labels


def compare(name: str, got, want, exact: bool) -> None:
    got = np.asarray(got.get() if hasattr(got, "get") else got)
    if exact:
        if not np.array_equal(got, want):
            raise SystemExit(f"{name}: morphoscope differs from scikit-image")
    elif abs(int(got.max()) - int(want.max())) > 0.01 * max(int(want.max()), 1):
        raise SystemExit(f"{name}: {got.max() + 1} segments, scikit-image {want.max() + 1}")


def run(size: str, device: str, reps: int, skimage: bool, emit) -> list[dict]:
    import morphoscope
    from morphoscope import _core

    width, height = (int(v) for v in size.split("x"))
    img = inputs(height, width)
    table, labels = cases(img, device)
    img["labels"] = labels
    try:
        import cupy as cp

        cupy_ok = morphoscope.cuda_available() and device in ("auto", "cuda")
    except ImportError:
        cp, cupy_ok = None, False
    rows = []
    for name, ms_call, sk_call, cu_call, key, exact in table:
        x = img[key]
        row = {"function": name, "size": size}
        got = ms_call(x)
        if not skimage:
            sk_call = None
        if sk_call is not None:
            t = time.perf_counter()
            want = sk_call(x)
            sk_first = time.perf_counter() - t
            compare(name, got, want, exact)
        call_s = []
        op_s = []
        for _ in range(reps):
            t = time.perf_counter()
            ms_call(x)
            call_s.append(time.perf_counter() - t)
            op_s.append(_core.last_op_seconds())
        row["morphoscope_s"] = statistics.median(call_s)
        row["op_s"] = statistics.median(op_s)
        row["overhead"] = 1.0 - row["op_s"] / row["morphoscope_s"]
        if cupy_ok:
            xd = cp.asarray(x)
            try:
                row["morphoscope_cupy_s"] = median_seconds(
                    lambda: ms_call(xd), reps, cp.cuda.Device().synchronize
                )
            except (TypeError, ValueError) as e:
                row["morphoscope_cupy_s"] = None
                row["cupy_note"] = str(e)
        if sk_call is not None:
            # scikit-image takes seconds a call at these sizes: its first call (the comparison)
            # is its figure when it took over 0.3 s (it has no kernels to compile), else the
            # median of 3 more.
            row["skimage_s"] = (
                sk_first if sk_first > 0.3 else median_seconds(lambda: sk_call(x), 3)
            )
        if cu_call is not None and cp is not None:
            xd = cp.asarray(x)
            row["cucim_s"] = median_seconds(lambda: cu_call(xd), reps, cp.cuda.Device().synchronize)
        rows.append(row)
        emit(row)
    return rows


def ms(v) -> str:
    return "—" if v is None else f"{v * 1e3:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1920x1080,3840x2160")
    ap.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--no-skimage", action="store_true",
                    help="leave scikit-image out (its max-tree takes tens of seconds at 4K)")
    args = ap.parse_args()
    import morphoscope

    backend = "cuda" if args.device != "cpu" and morphoscope.cuda_available() else "cpu"
    print(f"morphoscope on {backend}; {platform.processor() or platform.machine()}; "
          f"median of {args.reps} calls after one warm-up; times in ms\n")
    print("| function | size | morphoscope | with CuPy arrays | op alone | overhead "
          "| scikit-image | cuCIM |")
    print("|---|---|---|---|---|---|---|---|", flush=True)
    rows = []

    def emit(r):
        # Each row as soon as it is measured (a run cut short keeps what it measured).
        print(f"| {r['function']} | {r['size']} | {ms(r['morphoscope_s'])} "
              f"| {ms(r.get('morphoscope_cupy_s'))} | {ms(r['op_s'])} | {r['overhead']:.1%} "
              f"| {ms(r.get('skimage_s'))} | {ms(r.get('cucim_s'))} |", flush=True)
        rows.append(r)
        if args.json:
            args.json.write_text(json.dumps({"backend": backend, "rows": rows}, indent=1))

    for size in args.sizes.split(","):
        run(size, args.device, args.reps, not args.no_skimage, emit)


if __name__ == "__main__":
    main()
