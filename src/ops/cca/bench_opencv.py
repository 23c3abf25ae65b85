"""OpenCV CPU timings on the masks `bench_cca` wrote (same frames as the GPU figures).

Usage: python3 bench_opencv.py DIR   (DIR holds <size>_<image>.npy, 0/1 uint8 masks)
Times cv2.connectedComponents (labels) and cv2.connectedComponentsWithStats (labels + stats),
4/8-connectivity, CV_32S labels, median of 20 runs after 3 warm-up runs, with OpenCV's default
thread count and with one thread.
"""
import glob
import os
import sys
import time

import cv2
import numpy as np


def med(f, reps=20):
    for _ in range(3):
        f()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]


def main():
    d = sys.argv[1]
    print(f"opencv {cv2.__version__}, default threads {cv2.getNumThreads()}, cpus {os.cpu_count()}")
    print("case | threads | conn | n | labels ms | labels MPix/s | labels+stats ms | labels+stats MPix/s")
    default_threads = cv2.getNumThreads()
    for path in sorted(glob.glob(os.path.join(d, "*.npy"))):
        m = np.load(path)
        mpix = m.size / 1e6
        name = os.path.basename(path)[:-4]
        for threads in (default_threads, 1):
            cv2.setNumThreads(threads)
            for conn in (4, 8):
                n = cv2.connectedComponents(m, connectivity=conn, ltype=cv2.CV_32S)[0] - 1
                a = med(lambda: cv2.connectedComponents(m, connectivity=conn, ltype=cv2.CV_32S))
                b = med(lambda: cv2.connectedComponentsWithStats(m, connectivity=conn, ltype=cv2.CV_32S))
                print(f"{name} | {threads} | {conn} | {n} | {a:.3f} | {mpix / a * 1e3:.0f} | {b:.3f} | {mpix / b * 1e3:.0f}")
        cv2.setNumThreads(default_threads)


if __name__ == "__main__":
    main()
