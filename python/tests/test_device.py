"""device="auto"|"cuda"|"cpu" on every function: auto equals cpu, a bad name is ValueError, and
cuda without CUDA is RuntimeError (the GPU results are checked on a GPU machine)."""

import numpy as np
import pytest
from conftest import assert_same_segments, data

import morphoscope
from morphoscope import measure, morphology, orientation, segmentation

GRAY = data("maxtree", "text_u8.npy")
RGB = data("segmentation", "pic1_rgb.npy")
LABELS = measure.label(GRAY > 128, device="cpu")

CALLS = {
    "area_opening": lambda d: morphology.area_opening(GRAY, 20, device=d),
    "area_closing": lambda d: morphology.area_closing(GRAY, 20, device=d),
    "attribute_opening": lambda d: morphology.attribute_opening(GRAY, "height", 9, device=d),
    "attribute_closing": lambda d: morphology.attribute_closing(GRAY, "volume", 90, device=d),
    "label": lambda d: measure.label(GRAY > 128, device=d),
    "regionprops_table": lambda d: measure.regionprops_table(
        LABELS, GRAY, properties=("label", "area", "intensity_mean"), device=d
    ),
    "felzenszwalb": lambda d: segmentation.felzenszwalb(RGB, 100, device=d),
    "linear_opening": lambda d: orientation.linear_opening(GRAY, 9, 30, device=d),
    "linear_closing": lambda d: orientation.linear_closing(GRAY, 9, 30, device=d),
    "orientation_map": lambda d: orientation.orientation_map(GRAY, 9, 8, device=d).strength,
}


def same(a, b):
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])
    else:
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_device_argument(name):
    call = CALLS[name]
    cpu = call("cpu")
    if not morphoscope.cuda_available():
        same(call("auto"), cpu)
        with pytest.raises(RuntimeError, match="CUDA is unavailable"):
            call("cuda")
    elif name == "felzenszwalb":
        assert_same_segments(call("cuda"), cpu, "cuda")
    else:
        same(call("cuda"), cpu)
    with pytest.raises(ValueError, match="device"):
        call("gpu")
