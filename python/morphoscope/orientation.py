"""Linear openings and closings at any angle, and orientation maps. No scikit-image
counterpart: at 0°, 45°, 90° and 135° the opening equals scikit-image's
``opening(image, footprint, mode="ignore")`` with the segment as footprint; at other angles
the segment is digitised along periodic Bresenham lines (see docs/python.md).

CUDA arrays (CuPy, PyTorch, ``__cuda_array_interface__``, DLPack) of uint8 and uint16 are
computed on the device with no host copy, and the results are arrays of the input's library;
float32 ones are read to the host and the results copied back (the library computes float32
only on the CPU).
"""

from collections import namedtuple

import numpy as np

from . import _args, _core, _device

__all__ = ["OrientationMap", "linear_closing", "linear_opening", "orientation_map"]

OrientationMap = namedtuple("OrientationMap", ["strength", "angle", "spectrum", "angles"])
OrientationMap.__doc__ = """Orientation maps of one image.

strength: sup of the openings over the angles (inf of the closings), the input dtype.
angle: per pixel, the angle in degrees (float32) of the first opening reaching the strength.
spectrum: per angle, the sum of the opening over the image (float64).
angles: the angles in degrees (float64), in index order.
"""


def _image(image, what):
    arr = _args.image_2d(image, what)
    if arr.dtype.kind == "f":
        if arr.dtype.itemsize != 4:
            raise TypeError(f"{what} takes uint8, uint16 or float32 images; image is {arr.dtype}")
        if isinstance(arr, _device.CudaArray):
            return arr
        return np.ascontiguousarray(arr, dtype=np.float32)
    return _args.unsigned(arr, what)


def _run(arr, fn, device):
    """``fn(array, device)`` on a NumPy array, on a CUDA array on the device, or for a float32
    CUDA array on the host (read back, computed, the results copied to the device)."""
    if not isinstance(arr, _device.CudaArray):
        return fn(arr, device)
    if arr.dtype.kind == "f":
        _device.require_cuda(device)
        return arr.wrap(fn(np.ascontiguousarray(arr.to_host(), dtype=np.float32), device))
    return arr.call(fn, device)


def linear_opening(image, length, angle, *, device="auto"):
    """Opening by the segment of ``length`` pixels (odd) at ``angle`` degrees counter-clockwise
    from the +x axis (0: horizontal, 90: vertical, 45: rising to the right). Pixels outside the
    image are ignored. Images: 2D uint8, uint16 or float32; the result has the input's dtype.
    No scikit-image counterpart (see the module docs).
    """
    arr = _image(image, "linear_opening")
    return _run(arr, lambda a, d: _core.linear_opening(a, length, angle, False, d), device)


def linear_closing(image, length, angle, *, device="auto"):
    """Closing by the segment of :func:`linear_opening` (the dual: dark lines are kept)."""
    arr = _image(image, "linear_closing")
    return _run(arr, lambda a, d: _core.linear_opening(a, length, angle, True, d), device)


def orientation_map(image, length, angles=36, *, closing=False, device="auto"):
    """Openings (closings with ``closing``) by segments of ``length`` pixels at several angles:
    ``angles`` is a count K (angles 180°·k/K) or a sequence of angles in degrees. Returns an
    :class:`OrientationMap` (strength, angle, spectrum, angles). No scikit-image counterpart.
    For a CUDA array every field is an array of its library on the device (the spectrum and
    the angles, one value an angle, are copied there).
    """
    if isinstance(angles, (int, np.integer)) and not isinstance(angles, bool):
        count, listed = int(angles), []
        if count < 1:
            raise ValueError(f"angles = {count}: a count >= 1 or a sequence of angles")
    else:
        listed = [float(a) for a in angles]
        if not listed:
            raise ValueError("angles: an empty sequence; give a count or at least one angle")
        count = len(listed)
    arr = _image(image, "orientation_map")
    strength, angle, spectrum, degrees = _run(
        arr, lambda a, d: _core.orientation_map(a, length, count, listed, closing, d), device
    )
    return OrientationMap(strength, angle, spectrum, degrees)
