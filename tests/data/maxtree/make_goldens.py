"""Goldens for the max-tree filters: scikit-image's area_opening / area_closing on crops of the
real sample images (assets/samples), 8-bit and 16-bit, connectivity 1 (4) and 2 (8).

Each case saves its input crop and scikit-image's output as .npy (so the Rust test does not depend
on JPEG decoding or the grey conversion). Regenerate with:
    python3 -m venv /tmp/sk && /tmp/sk/bin/pip install scikit-image pillow numpy
    /tmp/sk/bin/python tests/data/maxtree/make_goldens.py
(made with scikit-image 0.26.0, numpy 2.4.6).
"""
import pathlib

import numpy as np
from PIL import Image
from skimage.morphology import area_closing, area_opening

HERE = pathlib.Path(__file__).resolve().parent
SAMPLES = HERE.parents[2] / "assets" / "samples"


def crop_gray(name, x, y, w, h):
    g = np.asarray(Image.open(SAMPLES / name).convert("L"))
    return np.ascontiguousarray(g[y : y + h, x : x + w])


def crop_u16(name, x, y, w, h):
    rgb = np.asarray(Image.open(SAMPLES / name).convert("RGB")).astype(np.uint16)
    c = rgb[y : y + h, x : x + w]
    # Red in the high byte, green in the low byte: thousands of distinct levels, real structure.
    return np.ascontiguousarray((c[..., 0] << 8) | c[..., 1])


INPUTS = {
    "baboon_u8": crop_gray("baboon.jpg", 200, 150, 128, 128),
    "text_u8": crop_gray("text_motion.jpg", 40, 40, 160, 96),
    "building_u8": crop_gray("building.jpg", 300, 100, 127, 93),
    "fruits_u16": crop_u16("fruits.jpg", 150, 120, 96, 80),
}

CASES = [
    ("baboon_u8", "opening", 30, 1),
    ("baboon_u8", "opening", 100, 2),
    ("baboon_u8", "closing", 50, 1),
    ("baboon_u8", "closing", 200, 2),
    ("text_u8", "closing", 8, 2),
    ("text_u8", "opening", 64, 1),
    ("building_u8", "opening", 500, 1),
    ("building_u8", "closing", 20000, 2),
    ("fruits_u16", "opening", 20, 1),
    ("fruits_u16", "closing", 40, 2),
]

for name, img in INPUTS.items():
    np.save(HERE / f"{name}.npy", img)
for name, op, n, conn in CASES:
    f = area_opening if op == "opening" else area_closing
    out = f(INPUTS[name], area_threshold=n, connectivity=conn)
    assert out.dtype == INPUTS[name].dtype
    np.save(HERE / f"{name}_{op}_a{n}_c{4 if conn == 1 else 8}.npy", out)
    print(name, op, n, conn, "changed pixels:", int((out != INPUTS[name]).sum()))
