"""Goldens for the cca op from OpenCV (pip: opencv-python-headless, numpy).

For each real sample image: a grey crop (stored, so JPEG decoders do not matter), OpenCV's Otsu
level (cv2.threshold THRESH_OTSU), and for 4- and 8-connectivity the components of the mask
`gray > T` (`gray <= T` for dark polarity; <name>_otsu.npy holds [T, dark]) from cv2.connectedComponentsWithStats plus cv2.moments of each component.

Rows are sorted by the raster index of each component's first pixel (OpenCV's 8-connectivity
block-based scan may number components in another order; morphoscope numbers them in raster
order of the first pixel). Columns of <name>_c<conn>.npy (float64):
  first_index, left, top, width, height, area, cx, cy, mu20, mu11, mu02

Run:  python3 make_goldens.py  (from this folder; reads ../../../assets/samples)
"""
import os

import cv2
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.join(HERE, "..", "..", "..", "assets", "samples")
# name -> (crop width, crop height, dark polarity): odd sizes included on purpose; dark text on a
# light page is labelled with the dark polarity (mask = gray <= T).
CROPS = {
    "baboon.jpg": (256, 256, False),
    "building.jpg": (253, 241, False),
    "fruits.jpg": (256, 200, False),
    "pic1.png": (199, 256, False),
    "text_motion.jpg": (256, 131, True),
}


def main():
    for name, (cw, ch, dark) in CROPS.items():
        g = cv2.imread(os.path.join(SAMPLES, name), cv2.IMREAD_GRAYSCALE)
        h, w = g.shape
        x0, y0 = max(0, (w - cw) // 2), max(0, (h - ch) // 2)
        crop = np.ascontiguousarray(g[y0:y0 + ch, x0:x0 + cw])
        stem = os.path.splitext(name)[0]
        t, _ = cv2.threshold(crop, 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)
        mask = ((crop <= t) if dark else (crop > t)).astype(np.uint8)
        np.save(os.path.join(HERE, f"{stem}_gray.npy"), crop)
        np.save(os.path.join(HERE, f"{stem}_otsu.npy"), np.array([int(t), int(dark)], dtype=np.int64))
        for conn in (4, 8):
            n, labels, stats, cents = cv2.connectedComponentsWithStats(mask, connectivity=conn, ltype=cv2.CV_32S)
            _, first = np.unique(labels.ravel(), return_index=True)  # first index per label 0..n-1
            rows = []
            for lab in range(1, n):
                m = cv2.moments((labels == lab).astype(np.uint8), binaryImage=True)
                l, tp, wd, ht, area = stats[lab]
                rows.append([first[lab], l, tp, wd, ht, area, cents[lab][0], cents[lab][1],
                             m["mu20"], m["mu11"], m["mu02"]])
            arr = np.array(sorted(rows), dtype=np.float64).reshape(-1, 11)
            np.save(os.path.join(HERE, f"{stem}_c{conn}.npy"), arr)
            print(f"{name} {cw}x{ch} otsu={int(t)} conn={conn}: {n - 1} components")
    print("opencv", cv2.__version__)


if __name__ == "__main__":
    main()
