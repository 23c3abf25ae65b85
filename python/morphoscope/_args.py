"""Argument checks shared by the modules: arrays, dtypes, connectivity (scikit-image's rules).
CUDA arrays (:class:`._device.CudaArray`) go through the same checks, with the same messages."""

import numpy as np

from . import _device


def image_2d(image, what, name="image"):
    """``image`` as a 2D NumPy array (or a :class:`._device.CudaArray` for a CUDA array), or
    ``ValueError`` naming its shape."""
    arr = _device.from_object(image)
    if arr is None:
        arr = np.asarray(image)
    if arr.ndim != 2:
        raise ValueError(
            f"{what} takes 2D images; {name} has {arr.ndim} dimensions (shape {arr.shape})"
        )
    return arr


def unsigned(arr, what, name="image", bits=(8, 16)):
    """A C-contiguous native-byte-order copy (or view) of an unsigned integer array of one of
    ``bits``, or ``TypeError`` naming the dtype. A CUDA array stays on the device (made
    contiguous there by its own library when it is not)."""
    if arr.dtype.kind != "u" or arr.dtype.itemsize * 8 not in bits:
        allowed = " or ".join(f"uint{b}" for b in bits)
        raise TypeError(f"{what} takes {allowed} images; {name} is {arr.dtype}")
    if isinstance(arr, _device.CudaArray):
        return arr
    return np.ascontiguousarray(arr, dtype=np.dtype(f"u{arr.dtype.itemsize}"))


def neighbours(connectivity, default):
    """scikit-image's ``connectivity`` of a 2D image (1: edges, 2 or more: edges and corners;
    ``None``: ``default``) as a neighbour count, 4 or 8."""
    if connectivity is None:
        connectivity = default
    if isinstance(connectivity, bool) or not isinstance(connectivity, (int, np.integer)):
        raise TypeError(f"connectivity must be an integer, got {connectivity!r}")
    if connectivity < 1:
        raise ValueError(
            f"connectivity={connectivity}: 1 (4 neighbours) or 2 (8 neighbours) for a 2D image"
        )
    return 4 if connectivity == 1 else 8
