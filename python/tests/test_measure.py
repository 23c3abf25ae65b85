"""morphoscope.measure against skimage.measure, argument by argument."""

import numpy as np
import pytest
from conftest import DEVICE, data, to_u16
from skimage import filters
from skimage import measure as skms

from morphoscope import measure as msms

PROPS = ("label", "area", "bbox", "centroid", "inertia_tensor")


def masks(img):
    """Binary masks of a grey image: Otsu's threshold, bright and dark."""
    t = filters.threshold_otsu(img)
    return [img > t, img <= t]


def test_label_equals_scikit_image_on_samples(gray):
    _, img = gray
    for mask in masks(img):
        for connectivity in [None, 1, 2]:
            want, n_want = skms.label(mask, connectivity=connectivity, return_num=True)
            got, n_got = msms.label(mask, connectivity=connectivity, return_num=True, device=DEVICE)
            assert got.dtype == want.dtype == np.int32
            np.testing.assert_array_equal(got, want)
            assert n_got == n_want > 1


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.int64, np.uint16, np.float64])
def test_label_dtypes_and_background(dtype):
    img = data("cca", "pic1_gray.npy")
    mask = (img > 128).astype(dtype)
    for background in [None, 0, 1]:
        want = skms.label(mask, background=background)
        got = msms.label(mask, background=background)
        assert got.dtype == want.dtype == np.int64
        np.testing.assert_array_equal(got, want)


def test_label_defaults_and_non_contiguous():
    img = data("cca", "building_gray.npy")
    mask = img > 100
    np.testing.assert_array_equal(msms.label(mask), skms.label(mask))
    for view in [mask[::2, 1::3], mask.T, np.asfortranarray(mask)]:
        np.testing.assert_array_equal(msms.label(view), skms.label(view))
    assert isinstance(msms.label(mask), np.ndarray)


def test_label_errors():
    mask = data("cca", "pic1_gray.npy") > 128
    for c in [0, 3]:
        with pytest.raises(ValueError, match="Connectivity") as ours:
            msms.label(mask, connectivity=c)
        with pytest.raises(ValueError) as theirs:
            skms.label(mask, connectivity=c)
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(ValueError, match="2D"):
        msms.label(np.zeros((2, 3, 4), bool))
    with pytest.raises(ValueError, match="binary"):
        msms.label(np.array([[0, 1, 2]]))
    with pytest.raises(ValueError, match="device"):
        msms.label(mask, device="tpu")


def check_table(got, want, exact_keys):
    assert list(got) == list(want)
    for k in want:
        assert got[k].dtype == want[k].dtype, k
        assert got[k].shape == want[k].shape, k
        if k in exact_keys:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)
        else:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-9, atol=1e-9, err_msg=k)


EXACT = {"label", "area", "centroid-0", "centroid-1", "intensity_mean"} | {
    f"bbox-{i}" for i in range(4)
}


def test_regionprops_table_equals_scikit_image_on_samples(gray):
    _, img = gray
    labels = skms.label(masks(img)[0])
    want = skms.regionprops_table(labels, img, properties=PROPS + ("intensity_mean",))
    got = msms.regionprops_table(labels, img, properties=PROPS + ("intensity_mean",))
    check_table(got, want, EXACT)
    img16 = to_u16(img)
    check_table(
        msms.regionprops_table(labels, img16, properties=("label", "intensity_mean")),
        skms.regionprops_table(labels, img16, properties=("label", "intensity_mean")),
        EXACT,
    )


def test_regionprops_table_regions_not_connected_gaps_and_negatives():
    img = data("cca", "baboon_gray.npy")
    labels = skms.label(img > 120)
    # Several components per value, unused values, negative values (background).
    scrambled = (labels * 7919 % 23).astype(np.int32) - 3
    for lab in [scrambled, labels.astype(np.uint16), labels[::3, ::2]]:
        want = skms.regionprops_table(lab, properties=PROPS)
        got = msms.regionprops_table(lab, properties=PROPS)
        check_table(got, want, EXACT)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint32", "uint16", "uint8", ">i4", "int8"])
def test_regionprops_table_label_dtypes(dtype):
    # Read as they are (int64, int32, uint32, uint16, uint8, any byte order) or converted (int8).
    labels = skms.label(data("cca", "pic1_gray.npy") > 128) % 120
    lab = labels.astype(dtype)
    want = skms.regionprops_table(lab, properties=PROPS)
    check_table(msms.regionprops_table(lab, properties=PROPS), want, EXACT)


def test_regionprops_table_defaults_separator_and_empty():
    labels = skms.label(data("cca", "fruits_gray.npy") > 90)
    check_table(msms.regionprops_table(labels), skms.regionprops_table(labels), EXACT)
    check_table(
        msms.regionprops_table(labels, properties=("bbox",), separator="_"),
        skms.regionprops_table(labels, properties=("bbox",), separator="_"),
        EXACT,
    )
    empty = np.zeros((5, 6), np.int64)
    check_table(
        msms.regionprops_table(empty, properties=PROPS),
        skms.regionprops_table(empty, properties=PROPS),
        EXACT,
    )


def test_regionprops_table_errors():
    labels = skms.label(data("cca", "pic1_gray.npy") > 128)
    for bad in [labels > 0, labels.astype(float)]:
        with pytest.raises(TypeError, match="ambiguous") as ours:
            msms.regionprops_table(bad)
        with pytest.raises(TypeError) as theirs:
            skms.regionprops_table(bad)
        assert str(ours.value).replace("morphoscope.", "skimage.") == str(theirs.value)
    with pytest.raises(AttributeError, match="intensity_mean"):
        msms.regionprops_table(labels, properties=("intensity_mean",))
    with pytest.raises(ValueError, match="not computed by morphoscope"):
        msms.regionprops_table(labels, properties=("perimeter",))
    with pytest.raises(TypeError, match="uint8 or uint16"):
        msms.regionprops_table(labels, labels.astype(float), properties=("intensity_mean",))
    with pytest.raises(ValueError, match="must match"):
        msms.regionprops_table(labels, np.zeros((3, 3), np.uint8), properties=("intensity_mean",))
