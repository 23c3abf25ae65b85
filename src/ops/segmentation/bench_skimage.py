"""Times scikit-image's felzenszwalb on the frames the GPU benchmark uses (bench_segmentation in
tests/gpu/segmentation.rs): real samples mirrored to 1920x1080 and 4096x2160 (decoded here with
PIL, so a few JPEG pixels may differ by one level from the Rust decoder; irrelevant for time).

    python3 src/ops/segmentation/bench_skimage.py SAMPLES_DIR [repeats]
"""
import sys
import time

import numpy as np
import skimage
from PIL import Image
from skimage.segmentation import felzenszwalb


def tiled(path, w, h, gray):
    src = np.asarray(Image.open(path).convert("RGB"))
    sh, sw = src.shape[:2]
    ys = np.arange(h)
    xs = np.arange(w)
    sy = np.where((ys // sh) % 2 == 0, ys % sh, sh - 1 - ys % sh)
    sx = np.where((xs // sw) % 2 == 0, xs % sw, sw - 1 - xs % sw)
    img = src[sy][:, sx]
    if gray:
        r, g, b = (img[..., i].astype(np.uint32) for i in range(3))
        img = ((r * 4899 + g * 9617 + b * 1868 + 8192) >> 14).astype(np.uint8)
    return np.ascontiguousarray(img)


def main():
    d = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    print(f"scikit-image {skimage.__version__}, numpy {np.__version__}")
    print("| frame | scale | segments | CPU ms (median of runs) | runs |")
    for name, w, h, gray, scales, n in [
        ("building.jpg", 1920, 1080, False, [100, 500], reps),
        ("fruits.jpg", 1920, 1080, False, [100, 500], reps),
        ("fruits.jpg", 1920, 1080, True, [100, 500], reps),
        ("building.jpg", 4096, 2160, False, [500], 1),
    ]:
        img = tiled(f"{d}/{name}", w, h, gray)
        for scale in scales:
            ts = []
            for _ in range(n):
                t = time.perf_counter()
                lab = felzenszwalb(img, scale=scale, sigma=0.8, min_size=20,
                                   channel_axis=None if gray else -1)
                ts.append((time.perf_counter() - t) * 1e3)
            print(f"| {name} {w}x{h}x{1 if gray else 3} | {scale} | {lab.max() + 1} | {sorted(ts)[len(ts) // 2]:.1f} | {n} |",
                  flush=True)


if __name__ == "__main__":
    main()
