#!/usr/bin/env python3
"""OpenCV CPU timings next to the GPU bench (tests/gpu/orientation.rs, bench_orientation).

usage: python3 opencv_bench.py DIR   (DIR = ORIENTATION_BENCH_DIR of the bench: raw u8 frames
hd_1920x1080.u8, k4_4096x2160.u8, sq_640x640.u8, the same pixels the GPU bench times).
Times cv2.morphologyEx(MORPH_OPEN) with the module's segment as the kernel (the 2D opening; equal
to ours at 0/45/90/135 degrees), all OpenCV threads, median wall time; plus numpy's max/argmax
over the stack for the orientation maps.
"""
import glob
import os
import statistics
import sys
import time

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_goldens import kernel  # noqa: E402


def load(d, prefix):
    path = glob.glob(os.path.join(d, prefix + "_*.u8"))[0]
    w, h = map(int, os.path.basename(path).split("_")[1].split(".")[0].split("x"))
    return np.fromfile(path, dtype=np.uint8).reshape(h, w)


def median_ms(f, runs):
    f()
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def orientation(img, angles, length):
    stack = np.stack([cv2.morphologyEx(img, cv2.MORPH_OPEN, kernel(a, length)) for a in angles])
    return stack.max(axis=0), stack.argmax(axis=0), stack.reshape(len(angles), -1).sum(axis=1)


def main():
    d = sys.argv[1]
    print(f"opencv {cv2.__version__}, threads {cv2.getNumThreads()}, cpus {os.cpu_count()}")
    hd, k4, sq = load(d, "hd"), load(d, "k4"), load(d, "sq")
    for name, img in [("1920x1080", hd), ("4096x2160", k4)]:
        for angle in [0, 30, 45, 90]:
            k = kernel(angle, 31)
            ms = median_ms(lambda: cv2.morphologyEx(img, cv2.MORPH_OPEN, k), 10)
            print(f"opencv opening {name} angle {angle:>3} L31: {ms:.2f} ms")
    a36 = [180.0 * i / 36 for i in range(36)]
    a180 = [float(i) for i in range(180)]
    for name, img, angles in [("1080p x 36 x L31", hd, a36), ("640x640 x 180 x L31", sq, a180)]:
        ms_open = median_ms(lambda: [cv2.morphologyEx(img, cv2.MORPH_OPEN, kernel(a, 31)) for a in angles], 3)
        ms_all = median_ms(lambda: orientation(img, angles, 31), 3)
        print(f"opencv orientation {name}: openings {ms_open:.1f} ms, with max/argmax/sums {ms_all:.1f} ms")


if __name__ == "__main__":
    main()
