"""morphoscope.morphology against skimage.morphology, argument by argument."""

import threading
import time

import numpy as np
import pytest
from conftest import DEVICE, data, to_u16
from skimage import morphology as skm

import morphoscope
from morphoscope import morphology as msm

CROPS_U8 = ["baboon_u8", "building_u8", "text_u8"]


@pytest.mark.parametrize("threshold", [1, 10, 64, 500])
@pytest.mark.parametrize("connectivity", [1, 2])
@pytest.mark.parametrize("op", ["area_opening", "area_closing"])
def test_area_filters_equal_scikit_image_on_samples(gray, op, threshold, connectivity):
    _, img = gray
    want = getattr(skm, op)(img, threshold, connectivity)
    got = getattr(msm, op)(img, threshold, connectivity, device=DEVICE)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert (want != img).any() or threshold == 1


@pytest.mark.parametrize("op", ["area_opening", "area_closing"])
def test_area_filters_16_bit(gray, op):
    _, img = gray
    img16 = to_u16(img[:200, :300])
    for threshold, conn in [(20, 1), (300, 2)]:
        want = getattr(skm, op)(img16, threshold, conn)
        got = getattr(msm, op)(img16, threshold, conn, device=DEVICE)
        assert got.dtype == np.uint16
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", CROPS_U8 + ["fruits_u16"])
def test_defaults_equal_scikit_image(name):
    img = data("maxtree", f"{name}.npy")
    for op in ["area_opening", "area_closing"]:
        np.testing.assert_array_equal(getattr(msm, op)(img), getattr(skm, op)(img))


def test_non_contiguous_and_fortran_inputs():
    img = data("maxtree", "baboon_u8.npy")
    for view in [img[::2, ::3], img[:, ::-1], np.asfortranarray(img), img.T]:
        assert not view.flags.c_contiguous
        np.testing.assert_array_equal(msm.area_opening(view, 30), skm.area_opening(view, 30))
        np.testing.assert_array_equal(
            msm.area_closing(view, 30, 2), skm.area_closing(view, 30, 2)
        )


def test_connectivity_above_two_is_eight_as_in_scikit_image():
    img = data("maxtree", "text_u8.npy")
    np.testing.assert_array_equal(msm.area_opening(img, 40, 3), skm.area_opening(img, 40, 3))
    np.testing.assert_array_equal(msm.area_opening(img, 40, 3), msm.area_opening(img, 40, 2))


def test_negative_and_fractional_thresholds_as_scikit_image():
    img = data("maxtree", "text_u8.npy")
    for t in [-5, 0, 2.5, 63.5]:
        np.testing.assert_array_equal(msm.area_opening(img, t), skm.area_opening(img, t))
        np.testing.assert_array_equal(msm.area_closing(img, t), skm.area_closing(img, t))


def test_attribute_area_is_area_opening():
    img = data("maxtree", "building_u8.npy")
    np.testing.assert_array_equal(
        msm.attribute_opening(img, "area", 200, 2), skm.area_opening(img, 200, 2)
    )
    np.testing.assert_array_equal(
        msm.attribute_closing(img, "area", 200), skm.area_closing(img, 200)
    )


@pytest.mark.parametrize(
    "attribute", ["height", "volume", "bbox_width", "bbox_height", "diameter", "diagonal"]
)
def test_attribute_filters_are_openings_and_closings(attribute):
    img = data("maxtree", "baboon_u8.npy")
    threshold = {"height": 20, "volume": 2000}.get(attribute, 12)
    o = msm.attribute_opening(img, attribute, threshold)
    c = msm.attribute_closing(img, attribute, threshold)
    # Anti-extensive / extensive, idempotent, and not the identity.
    assert (o <= img).all() and (c >= img).all()
    if attribute not in ("height", "volume"):  # contrast filters are not idempotent
        np.testing.assert_array_equal(msm.attribute_opening(o, attribute, threshold), o)
        np.testing.assert_array_equal(msm.attribute_closing(c, attribute, threshold), c)
    assert (o != img).any() and (c != img).any()
    # Threshold 0 keeps every node.
    np.testing.assert_array_equal(msm.attribute_opening(img, attribute, 0), img)


def test_height_filter_removes_low_contrast_peaks():
    img = np.full((7, 9), 10, np.uint8)
    img[1, 1] = 13  # contrast 3
    img[4:6, 5:7] = 40  # contrast 30
    out = msm.attribute_opening(img, "height", 5)
    assert out[1, 1] == 10 and (out[4:6, 5:7] == 40).all()


def test_errors_follow_the_arguments():
    img = data("maxtree", "text_u8.npy")
    with pytest.raises(TypeError, match="uint8 or uint16"):
        msm.area_opening(img.astype(np.float64))
    with pytest.raises(TypeError, match="int16"):
        msm.area_opening(img.astype(np.int16))
    with pytest.raises(ValueError, match="2D"):
        msm.area_opening(np.stack([img, img]))
    with pytest.raises(ValueError, match="connectivity"):
        msm.area_opening(img, 10, 0)
    with pytest.raises(ValueError, match="device"):
        msm.area_opening(img, device="gpu")
    with pytest.raises(ValueError, match="attribute"):
        msm.attribute_opening(img, "perimeter", 3)
    with pytest.raises(ValueError, match="threshold"):
        msm.attribute_opening(img, "height", float("nan"))
    with pytest.raises(ValueError, match="parent has shape"):
        msm.area_opening(img, 10, 1, np.zeros((3, 3), np.int64))
    with pytest.raises(TypeError, match="uint8 or uint16"):
        msm.max_tree(img.astype(np.float32))


def test_cuda_unavailable_raises_runtime_error():
    if morphoscope.cuda_available():
        pytest.skip("CUDA is available here")
    img = data("maxtree", "text_u8.npy")
    with pytest.raises(RuntimeError, match="CUDA is unavailable"):
        msm.area_opening(img, device="cuda")
    np.testing.assert_array_equal(msm.area_opening(img, device="auto"), skm.area_opening(img))


def test_gil_is_released_while_computing():
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, (3000, 3000), dtype=np.uint8)
    took = []

    def work():
        t = time.perf_counter()
        msm.area_opening(img, 500, device="cpu")
        took.append(time.perf_counter() - t)

    worker = threading.Thread(target=work)
    last, gap = time.perf_counter(), 0.0
    worker.start()
    while worker.is_alive():
        now = time.perf_counter()
        gap, last = max(gap, now - last), now
    worker.join()
    assert took and took[0] > 0.05, took
    # Holding the GIL would stall this loop for the whole call.
    assert gap < took[0] / 2, (gap, took[0])


# scikit-image's diameter filters take seconds a sample picture: two settings each.
@pytest.mark.parametrize("threshold,connectivity", [(3, 1), (40, 2)])
@pytest.mark.parametrize("op", ["diameter_opening", "diameter_closing"])
def test_diameter_filters_equal_scikit_image_on_samples(gray, op, threshold, connectivity):
    _, img = gray
    want = getattr(skm, op)(img, threshold, connectivity)
    got = getattr(msm, op)(img, threshold, connectivity, device=DEVICE)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert (want != img).any()


@pytest.mark.parametrize("name", CROPS_U8 + ["fruits_u16"])
def test_diameter_defaults_and_16_bit_equal_scikit_image(name):
    img = data("maxtree", f"{name}.npy")
    for op in ["diameter_opening", "diameter_closing"]:
        np.testing.assert_array_equal(getattr(msm, op)(img), getattr(skm, op)(img))
        np.testing.assert_array_equal(
            getattr(msm, op)(img, 15, 2), getattr(skm, op)(img, 15, 2)
        )


def test_diameter_opening_keeps_long_thin_lines():
    img = np.zeros((20, 20), np.uint8)
    img[5, 2:18] = 200  # a 16-pixel line: area 16, longest side 16
    img[12:14, 12:14] = 150  # a 2x2 blob: area 4, longest side 2
    out = msm.diameter_opening(img, 8)
    assert (out[5, 2:18] == 200).all() and (out[12:14, 12:14] == 0).all()
    np.testing.assert_array_equal(out, skm.diameter_opening(img, 8))


@pytest.mark.parametrize("connectivity", [1, 2])
def test_max_tree_equals_scikit_image_on_samples(gray, connectivity):
    _, img = gray
    want_parent, want_traverser = skm.max_tree(img, connectivity)
    parent, traverser = msm.max_tree(img, connectivity, device=DEVICE)
    assert parent.dtype == want_parent.dtype == np.int64 and parent.shape == img.shape
    assert traverser.dtype == want_traverser.dtype
    np.testing.assert_array_equal(parent, want_parent)
    np.testing.assert_array_equal(traverser, want_traverser)


@pytest.mark.parametrize("name", CROPS_U8 + ["fruits_u16"])
def test_max_tree_of_crops_and_16_bit_equals_scikit_image(name):
    img = data("maxtree", f"{name}.npy")
    for conn in (1, 2):
        for got, want in zip(msm.max_tree(img, conn), skm.max_tree(img, conn)):
            np.testing.assert_array_equal(got, want)


def test_max_tree_feeds_scikit_image_filters():
    img = data("maxtree", "building_u8.npy")
    parent, traverser = msm.max_tree(img)
    np.testing.assert_array_equal(
        skm.area_opening(img, 50, parent=parent, tree_traverser=traverser),
        skm.area_opening(img, 50),
    )
    # A flat image is one node: every pixel points to the first.
    flat_parent, _ = msm.max_tree(np.full((4, 5), 7, np.uint8))
    assert (flat_parent == 0).all()
