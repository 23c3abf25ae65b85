"""Max-tree attribute filters, scikit-image's ``skimage.morphology`` names and defaults.

``area_opening`` and ``area_closing`` equal scikit-image's bit for bit (uint8 and uint16). The
attribute openings and closings filter by other attributes of the max-tree (min-tree) nodes:
``area``, ``height``, ``volume``, ``bbox_width``, ``bbox_height`` and ``diameter`` (the bounding
box's diagonal, not scikit-image's ``diameter_opening``, which thresholds the bounding box's
longest side; that one is not provided).

CUDA arrays (CuPy, PyTorch, ``__cuda_array_interface__``, DLPack) are filtered on the device
with no host copy and the result is an array of the input's library (see docs/python.md).
"""

from . import _args, _core, _device

__all__ = ["area_closing", "area_opening", "attribute_closing", "attribute_opening"]


def _filter(image, tree, attribute, threshold, connectivity, device, what):
    arr = _args.unsigned(_args.image_2d(image, what), what)
    conn = _args.neighbours(connectivity, 1)

    def run(a, d):
        return _core.attribute_filter(a, tree, attribute, float(threshold), conn, d)

    if isinstance(arr, _device.CudaArray):
        return arr.call(run, device)
    return run(arr, device)


def area_opening(image, area_threshold=64, connectivity=1, *, device="auto"):
    """Removes the bright components smaller than ``area_threshold`` pixels: every pixel takes
    the highest level at which its upper level-set component has at least ``area_threshold``
    pixels. scikit-image: ``skimage.morphology.area_opening`` (same result, dtype and shape).

    ``connectivity`` 1: 4 neighbours, 2: 8. Images: 2D uint8 or uint16.
    """
    threshold = max(float(area_threshold), 0.0)
    return _filter(image, "max", "area", threshold, connectivity, device, "area_opening")


def area_closing(image, area_threshold=64, connectivity=1, *, device="auto"):
    """Fills the dark components smaller than ``area_threshold`` pixels (the dual of
    :func:`area_opening`). scikit-image: ``skimage.morphology.area_closing``.
    """
    threshold = max(float(area_threshold), 0.0)
    return _filter(image, "min", "area", threshold, connectivity, device, "area_closing")


def attribute_opening(image, attribute, threshold, connectivity=1, *, device="auto"):
    """Keeps the bright components (max-tree nodes) whose ``attribute`` is at least
    ``threshold``; the others take the level of their nearest kept ancestor. ``attribute``:
    ``"area"``, ``"height"`` (contrast to the parent level), ``"volume"``, ``"bbox_width"``,
    ``"bbox_height"``, ``"diameter"`` (bounding-box diagonal). No scikit-image counterpart
    except ``attribute="area"`` (:func:`area_opening`).
    """
    return _filter(image, "max", attribute, threshold, connectivity, device, "attribute_opening")


def attribute_closing(image, attribute, threshold, connectivity=1, *, device="auto"):
    """The dual of :func:`attribute_opening` on the min-tree: fills the dark components whose
    ``attribute`` is below ``threshold``.
    """
    return _filter(image, "min", attribute, threshold, connectivity, device, "attribute_closing")
