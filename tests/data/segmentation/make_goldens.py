"""Goldens for src/ops/segmentation (Felzenszwalb) and src/ops/blur, made with scikit-image 0.26.

    python3 -m venv /tmp/sk && /tmp/sk/bin/pip install "scikit-image==0.26.*"
    /tmp/sk/bin/python tests/data/segmentation/make_goldens.py

Writes, next to this script:
- <crop>_rgb.npy / <crop>_gray.npy: the u8 input crops (decoded here once, so the Rust test
  reads exactly the pixels scikit-image saw; grey = OpenCV's BT.601 fixed-point rounding);
- <case>.npy: skimage.segmentation.felzenszwalb labels (uint16), one per case;
- blur_<crop>_s<sigma>.npy: skimage.filters.gaussian(img_as_float64(crop), sigma=[s, s, 0],
  mode='reflect', channel_axis=-1) (float64), what felzenszwalb smooths with;
- manifest.json: the cases, their parameters and scikit-image's segment counts.
"""
import json
import os

import numpy as np
import skimage
from skimage.filters import gaussian
from skimage.io import imread
from skimage.segmentation import felzenszwalb
from skimage.util import img_as_float64

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.join(HERE, "..", "..", "..", "assets", "samples")

# name: (file, top, left, size)
CROPS = {
    "fruits": ("fruits.jpg", 100, 150, 160),
    "baboon": ("baboon.jpg", 200, 150, 160),
    "building": ("building.jpg", 200, 300, 160),
    "pic1": ("pic1.png", 50, 100, 160),
    "text": ("text_motion.jpg", 100, 200, 160),
}


def gray(rgb):
    r, g, b = (rgb[..., i].astype(np.uint32) for i in range(3))
    return ((r * 4899 + g * 9617 + b * 1868 + 8192) >> 14).astype(np.uint8)


def main():
    crops = {}
    for name, (f, top, left, s) in CROPS.items():
        img = imread(os.path.join(SAMPLES, f))[..., :3]
        rgb = np.ascontiguousarray(img[top:top + s, left:left + s])
        crops[name] = rgb
        np.save(os.path.join(HERE, f"{name}_rgb.npy"), rgb)
        np.save(os.path.join(HERE, f"{name}_gray.npy"), gray(rgb))

    cases = []
    plan = []
    for name in ["fruits", "baboon", "building", "pic1"]:
        for scale in [1, 100, 500]:
            plan.append((name, "rgb", scale, 0.8, 20))
    for name in ["text", "building"]:
        for scale in [1, 100, 500]:
            plan.append((name, "gray", scale, 0.8, 20))
    plan += [("fruits", "rgb", 300, 0.5, 50), ("baboon", "gray", 100, 1.0, 10)]
    for name, mode, scale, sigma, min_size in plan:
        img = crops[name] if mode == "rgb" else gray(crops[name])
        labels = felzenszwalb(img, scale=scale, sigma=sigma, min_size=min_size,
                              channel_axis=-1 if mode == "rgb" else None)
        assert labels.max() < 65536
        case = f"{name}_{mode}_k{scale}_s{sigma}_m{min_size}"
        np.save(os.path.join(HERE, case + ".npy"), labels.astype(np.uint16))
        cases.append({"case": case, "input": f"{name}_{mode}.npy", "channels": 3 if mode == "rgb" else 1,
                      "scale": scale, "sigma": sigma, "min_size": min_size,
                      "segments": int(labels.max()) + 1})

    blurs = []
    for sigma in [0.8, 2.0]:
        crop = crops["fruits"][:40, :48]
        sm = gaussian(img_as_float64(crop), sigma=[sigma, sigma, 0], mode="reflect", channel_axis=-1)
        fname = f"blur_fruits_s{sigma}.npy"
        np.save(os.path.join(HERE, fname), sm)
        blurs.append({"file": fname, "input": "fruits_rgb.npy", "rows": 40, "cols": 48, "sigma": sigma})

    with open(os.path.join(HERE, "manifest.json"), "w") as fh:
        json.dump({"skimage": skimage.__version__, "numpy": np.__version__, "cases": cases, "blurs": blurs},
                  fh, indent=1)
    for c in cases:
        print(c["case"], c["segments"])


if __name__ == "__main__":
    main()
