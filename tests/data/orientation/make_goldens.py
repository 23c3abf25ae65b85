#!/usr/bin/env python3
"""Goldens for src/ops/orientation: OpenCV's morphologyEx(MORPH_OPEN / MORPH_CLOSE) with the
line structuring element of the module's definition, at 0, 45, 90 and 135 degrees, on crops of
the real sample images (u8, u16 and f32).

Run from the repository root, in a venv with `pip install numpy opencv-python-headless`:
    python tests/data/orientation/make_goldens.py
(made with opencv-python-headless 5.0.0, numpy 2.4). Writes <name>_input.npy (H, W),
<name>_cases.npy (n, H, W) and goldens.json listing the cases in order. The Rust test
(cpu.rs, `opencv_goldens`) reads the inputs from the .npy files, not from the JPEGs, so the
colour-to-grey conversion does not matter.
"""
import json
import math
import os

import cv2
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.join(HERE, "..", "..", "..", "assets", "samples")


def round_away(v):
    return math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1)


def segment_offsets(angle_deg, length):
    """The module's segment: L pixels, (column, row) offsets, y up (see mod.rs)."""
    r = (length - 1) // 2
    if r == 0:
        return [(0, 0)]
    a = math.radians(angle_deg)
    c, s = math.cos(a), math.sin(a)
    m = max(abs(c), abs(s))
    dx, dy = round_away(r * c / m), -round_away(r * s / m)
    if abs(dx) == r:
        q = dy * (1 if dx > 0 else -1)
        return [(k, round_away(k * q / r)) for k in range(-r, r + 1)]
    q = dx * (1 if dy > 0 else -1)
    return [(round_away(k * q / r), k) for k in range(-r, r + 1)]


def kernel(angle_deg, length):
    r = (length - 1) // 2
    k = np.zeros((length, length), np.uint8)
    for dx, dy in segment_offsets(angle_deg, length):
        k[r + dy, r + dx] = 1
    return k


def crop(name, x, y, w, h):
    img = cv2.imread(os.path.join(SAMPLES, name), cv2.IMREAD_GRAYSCALE)
    return np.ascontiguousarray(img[y:y + h, x:x + w])


def main():
    # The 135-degree segment falls to the right: check the kernel orientation once.
    assert (kernel(135, 3) == np.eye(3, dtype=np.uint8)).all()
    assert (kernel(45, 3) == np.fliplr(np.eye(3, dtype=np.uint8))).all()
    rng = np.random.default_rng(2015)
    building = crop("building.jpg", 300, 200, 128, 96)
    baboon = crop("baboon.jpg", 200, 150, 128, 96)
    b16 = (building.astype(np.uint16) * 257 + rng.integers(0, 257, building.shape)).astype(np.uint16)
    bf = (crop("fruits.jpg", 180, 200, 64, 48).astype(np.float32) / 255.0) - 0.1
    sets = [
        ("building_u8", building, [7, 21], ["open", "close"]),
        ("baboon_u8", baboon, [15], ["open", "close"]),
        ("building_u16", b16, [9], ["open", "close"]),
        ("fruits_f32", bf, [9], ["open"]),
    ]
    index = []
    for name, img, lengths, ops in sets:
        cases, outs = [], []
        for length in lengths:
            for op in ops:
                for angle in [0, 45, 90, 135]:
                    morph = cv2.MORPH_OPEN if op == "open" else cv2.MORPH_CLOSE
                    outs.append(cv2.morphologyEx(img, morph, kernel(angle, length)))
                    cases.append({"angle": angle, "length": length, "op": op})
        np.save(os.path.join(HERE, f"{name}_input.npy"), img)
        np.save(os.path.join(HERE, f"{name}_cases.npy"), np.stack(outs))
        index.append({"name": name, "dtype": str(img.dtype), "cases": cases})
    with open(os.path.join(HERE, "goldens.json"), "w") as f:
        json.dump({"opencv": cv2.__version__, "sets": index}, f, indent=1)
    print("wrote", len(index), "sets with opencv", cv2.__version__)


if __name__ == "__main__":
    main()
