"""Max-tree attribute filters, scikit-image's ``skimage.morphology`` names and defaults.

``area_opening``, ``area_closing``, ``diameter_opening``, ``diameter_closing`` and ``max_tree``
equal scikit-image's bit for bit (uint8 and uint16). The attribute openings and closings filter
by other attributes of the max-tree (min-tree) nodes: ``area``, ``height``, ``volume``,
``bbox_width``, ``bbox_height``, ``diameter`` (the bounding box's longest side, scikit-image's
"maximal extension") and ``diagonal`` (the bounding box's diagonal).

CUDA arrays (CuPy, PyTorch, ``__cuda_array_interface__``, DLPack) are filtered on the device
with no host copy and the result is an array of the input's library (see docs/python.md).
"""

import numpy as np

from . import _args, _core, _device

__all__ = [
    "area_closing",
    "area_opening",
    "attribute_closing",
    "attribute_opening",
    "diameter_closing",
    "diameter_opening",
    "max_tree",
]


def _filter(image, tree, attribute, threshold, connectivity, device, what):
    arr = _args.unsigned(_args.image_2d(image, what), what)
    conn = _args.neighbours(connectivity, 1)

    def run(a, d):
        return _core.attribute_filter(a, tree, attribute, float(threshold), conn, d)

    if isinstance(arr, _device.CudaArray):
        return arr.call(run, device)
    return run(arr, device)


def _given_tree(image, parent, tree_traverser, what):
    """scikit-image's optional ``parent``/``tree_traverser``: accepted for the same calls, checked
    against the image's shape. morphoscope builds the tree of ``image`` itself (on the device
    asked for), so a tree of another image does not change the result."""
    shape = np.shape(image)
    if parent is not None and np.shape(parent) != shape:
        raise ValueError(f"{what}: parent has shape {np.shape(parent)}, image {shape}")
    if tree_traverser is not None and np.size(tree_traverser) != int(np.prod(shape)):
        raise ValueError(
            f"{what}: tree_traverser has {np.size(tree_traverser)} entries, the image "
            f"{int(np.prod(shape))} pixels"
        )


def _skimage_filter(
    image, tree, attribute, threshold, connectivity, parent, tree_traverser, device, what
):
    """scikit-image's area and diameter filters: its optional tree checked, a negative
    threshold taken as 0 (every component kept)."""
    _given_tree(image, parent, tree_traverser, what)
    return _filter(
        image, tree, attribute, max(float(threshold), 0.0), connectivity, device, what
    )


def area_opening(
    image, area_threshold=64, connectivity=1, parent=None, tree_traverser=None, *, device="auto"
):
    """Removes the bright components smaller than ``area_threshold`` pixels: every pixel takes
    the highest level at which its upper level-set component has at least ``area_threshold``
    pixels. scikit-image: ``skimage.morphology.area_opening`` (same result, dtype and shape).

    ``connectivity`` 1: 4 neighbours, 2: 8. Images: 2D uint8 or uint16. ``parent`` and
    ``tree_traverser`` (scikit-image's precomputed tree) are accepted and shape-checked; the tree
    is rebuilt from ``image``.
    """
    return _skimage_filter(
        image, "max", "area", area_threshold, connectivity, parent, tree_traverser, device, "area_opening"
    )


def area_closing(
    image, area_threshold=64, connectivity=1, parent=None, tree_traverser=None, *, device="auto"
):
    """Fills the dark components smaller than ``area_threshold`` pixels (the dual of
    :func:`area_opening`). scikit-image: ``skimage.morphology.area_closing``.
    """
    return _skimage_filter(
        image, "min", "area", area_threshold, connectivity, parent, tree_traverser, device, "area_closing"
    )


def diameter_opening(
    image, diameter_threshold=8, connectivity=1, parent=None, tree_traverser=None, *,
    device="auto",
):
    """Removes the bright components whose bounding box's longest side is shorter than
    ``diameter_threshold`` pixels (long thin structures stay). scikit-image:
    ``skimage.morphology.diameter_opening`` (same result, dtype and shape).

    ``connectivity`` 1: 4 neighbours, 2: 8. Images: 2D uint8 or uint16.
    """
    return _skimage_filter(
        image, "max", "diameter", diameter_threshold, connectivity, parent, tree_traverser, device, "diameter_opening"
    )


def diameter_closing(
    image, diameter_threshold=8, connectivity=1, parent=None, tree_traverser=None, *,
    device="auto",
):
    """Fills the dark components whose bounding box's longest side is shorter than
    ``diameter_threshold`` pixels (the dual of :func:`diameter_opening`). scikit-image:
    ``skimage.morphology.diameter_closing``.
    """
    return _skimage_filter(
        image, "min", "diameter", diameter_threshold, connectivity, parent, tree_traverser, device, "diameter_closing"
    )


def attribute_opening(image, attribute, threshold, connectivity=1, *, device="auto"):
    """Keeps the bright components (max-tree nodes) whose ``attribute`` is at least
    ``threshold``; the others take the level of their nearest kept ancestor. ``attribute``:
    ``"area"``, ``"height"`` (contrast to the parent level), ``"volume"``, ``"bbox_width"``,
    ``"bbox_height"``, ``"diameter"`` (longest bounding-box side), ``"diagonal"`` (bounding-box
    diagonal). No scikit-image counterpart except ``"area"`` (:func:`area_opening`) and
    ``"diameter"`` (:func:`diameter_opening`).
    """
    return _filter(image, "max", attribute, threshold, connectivity, device, "attribute_opening")


def attribute_closing(image, attribute, threshold, connectivity=1, *, device="auto"):
    """The dual of :func:`attribute_opening` on the min-tree: fills the dark components whose
    ``attribute`` is below ``threshold``.
    """
    return _filter(image, "min", attribute, threshold, connectivity, device, "attribute_closing")


def max_tree(image, connectivity=1, *, device="auto"):
    """The max-tree of an image as scikit-image returns it: ``(parent, tree_traverser)``.
    scikit-image: ``skimage.morphology.max_tree`` (same arrays, bit for bit).

    ``parent``: int64, the image's shape; each pixel's parent as a raster index, every flat zone
    (node) represented by its first pixel in raster order, which points to its parent node's
    representative (the root to itself). ``tree_traverser``: int64, the raster indices in an
    order where a parent comes before its children (the pixels sorted by value, stable).
    ``connectivity`` 1: 4 neighbours, 2: 8. Images: 2D uint8 or uint16; the tree is built on
    ``device``, its traverser (a counting sort) on the host. A CUDA array is read to the host
    (the representatives are mapped there) and both arrays come back in its library.
    """
    arr = _args.unsigned(_args.image_2d(image, "max_tree"), "max_tree")
    conn = _args.neighbours(connectivity, 1)
    on_device = isinstance(arr, _device.CudaArray)
    if on_device:
        _device.require_cuda(device)
        host = np.ascontiguousarray(arr.to_host())
    else:
        host = arr
    parent, traverser = _core.max_tree(host, conn, device)
    if on_device:
        return arr.from_host(parent), arr.from_host(traverser)
    return parent, traverser
