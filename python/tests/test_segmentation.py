"""morphoscope.segmentation against skimage.segmentation, argument by argument."""

import numpy as np
import pytest
from conftest import DEVICE, assert_same_segments, data
from skimage import segmentation as sks

from morphoscope import segmentation as mss


def small(rgb):
    """A 256-wide crop: scikit-image's Kruskal is slow on full pictures."""
    return np.ascontiguousarray(rgb[:192, :256])


@pytest.mark.parametrize("scale,sigma,min_size", [(1, 0.8, 20), (100, 0.8, 20), (500, 1.5, 50)])
def test_felzenszwalb_equals_scikit_image_on_samples(still, scale, sigma, min_size):
    name, rgb = still
    if name == "pic1.png":
        pytest.skip("pic1.png has flat patches: exact weight ties, ordered differently")
    rgb = small(rgb)
    for img in [rgb, rgb[..., 1]]:
        want = sks.felzenszwalb(img, scale, sigma, min_size)
        got = mss.felzenszwalb(img, scale, sigma, min_size, device=DEVICE)
        assert_same_segments(got, want, DEVICE)


@pytest.mark.parametrize("name", ["building_gray", "text_gray", "baboon_rgb", "fruits_rgb"])
def test_felzenszwalb_defaults_on_crops(name):
    img = data("segmentation", f"{name}.npy")
    np.testing.assert_array_equal(mss.felzenszwalb(img), sks.felzenszwalb(img))


def test_felzenszwalb_channel_axis_and_layouts():
    rgb = data("segmentation", "fruits_rgb.npy")
    first = np.moveaxis(rgb, -1, 0)
    np.testing.assert_array_equal(
        mss.felzenszwalb(first, 50, channel_axis=0), sks.felzenszwalb(first, 50, channel_axis=0)
    )
    grey = rgb[..., 0]
    np.testing.assert_array_equal(
        mss.felzenszwalb(grey, 50, channel_axis=None),
        sks.felzenszwalb(grey, 50, channel_axis=None),
    )
    for view in [rgb[::2, ::2], rgb[:, ::-1]]:
        np.testing.assert_array_equal(mss.felzenszwalb(view, 80), sks.felzenszwalb(view, 80))


def test_felzenszwalb_errors():
    rgb = data("segmentation", "pic1_rgb.npy")
    with pytest.raises(ValueError, match="single or multi-channel") as ours:
        mss.felzenszwalb(rgb, channel_axis=None)
    with pytest.raises(ValueError) as theirs:
        sks.felzenszwalb(rgb, channel_axis=None)
    assert str(ours.value) == str(theirs.value)
    with pytest.raises(TypeError, match="uint8"):
        mss.felzenszwalb(rgb.astype(np.float64) / 255)
    with pytest.raises(ValueError, match="channels"):
        mss.felzenszwalb(np.zeros((8, 8, 4), np.uint8))
    with pytest.raises(ValueError, match="sigma"):
        mss.felzenszwalb(rgb, sigma=-1)
    with pytest.raises(ValueError, match="scale"):
        mss.felzenszwalb(rgb, scale=float("inf"))
    with pytest.raises(ValueError, match="device"):
        mss.felzenszwalb(rgb, device="")
