"""morphoscope.orientation: at 0, 45, 90 and 135 degrees the linear opening is scikit-image's
opening by the line footprint with mode="ignore"; orientation maps are the sup over angles."""

import numpy as np
import pytest
from conftest import data, to_u16
from skimage import morphology as skm

from morphoscope import orientation as mso


def footprint(angle, length):
    """The segment of the library's definition at 0/45/90/135 degrees (45 rises to the right)."""
    r = (length - 1) // 2
    k = np.zeros((length, length), np.uint8)
    for i in range(-r, r + 1):
        dx, dy = {0: (i, 0), 90: (0, i), 45: (i, -i), 135: (i, i)}[angle]
        k[r + dy, r + dx] = 1
    return k


@pytest.mark.parametrize("angle", [0, 45, 90, 135])
@pytest.mark.parametrize("length", [3, 11, 31])
def test_linear_opening_equals_scikit_image(gray, angle, length):
    _, img = gray
    img = img[:240, :320]
    fp = footprint(angle, length)
    for x in [img, to_u16(img), img.astype(np.float32) / 7]:
        got = mso.linear_opening(x, length, angle, device="cpu")
        assert got.dtype == x.dtype and got.shape == x.shape
        np.testing.assert_array_equal(got, skm.opening(x, fp, mode="ignore"))
        np.testing.assert_array_equal(
            mso.linear_closing(x, length, angle, device="cpu"), skm.closing(x, fp, mode="ignore")
        )


def test_linear_opening_non_contiguous():
    img = data("orientation", "baboon_u8_input.npy")
    for view in [img[::2, ::3], img.T, np.asfortranarray(img)]:
        np.testing.assert_array_equal(
            mso.linear_opening(view, 9, 90), skm.opening(view, footprint(90, 9), mode="ignore")
        )


def test_orientation_map_is_the_sup_of_the_openings():
    img = data("orientation", "building_u8_input.npy")
    angles = [0, 45, 90, 135]
    openings = np.stack([skm.opening(img, footprint(a, 15), mode="ignore") for a in angles])
    m = mso.orientation_map(img, 15, angles)
    np.testing.assert_array_equal(m.strength, openings.max(axis=0))
    np.testing.assert_array_equal(m.angle, np.array(angles, np.float32)[openings.argmax(axis=0)])
    np.testing.assert_array_equal(m.spectrum, openings.sum(axis=(1, 2), dtype=np.float64))
    np.testing.assert_array_equal(m.angles, angles)
    assert m.strength.dtype == np.uint8 and m.angle.dtype == np.float32
    closed = mso.orientation_map(img, 15, angles, closing=True)
    closings = np.stack([skm.closing(img, footprint(a, 15), mode="ignore") for a in angles])
    np.testing.assert_array_equal(closed.strength, closings.min(axis=0))
    even = mso.orientation_map(img, 15, 4)
    np.testing.assert_array_equal(even.angles, angles)
    np.testing.assert_array_equal(even.strength, m.strength)


def test_orientation_errors():
    img = data("orientation", "baboon_u8_input.npy")
    with pytest.raises(ValueError, match="length"):
        mso.linear_opening(img, 4, 0)
    with pytest.raises(ValueError, match="angle"):
        mso.linear_opening(img, 5, float("nan"))
    with pytest.raises(TypeError, match="float32"):
        mso.linear_opening(img.astype(np.float64), 5, 0)
    with pytest.raises(ValueError, match="NaN|nan"):
        mso.linear_opening(np.full((4, 4), np.nan, np.float32), 3, 0)
    with pytest.raises(ValueError, match="angles"):
        mso.orientation_map(img, 5, 0)
    with pytest.raises(ValueError, match="angles"):
        mso.orientation_map(img, 5, [])
