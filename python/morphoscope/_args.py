"""Argument checks shared by the modules: arrays, dtypes, connectivity (scikit-image's rules)."""

import numpy as np


def image_2d(image, what, name="image"):
    """``image`` as a 2D NumPy array, or ``ValueError`` naming its shape."""
    arr = np.asarray(image)
    if arr.ndim != 2:
        raise ValueError(
            f"{what} takes 2D images; {name} has {arr.ndim} dimensions (shape {arr.shape})"
        )
    return arr


def unsigned(arr, what, name="image", bits=(8, 16)):
    """A C-contiguous native-byte-order copy (or view) of an unsigned integer array of one of
    ``bits``, or ``TypeError`` naming the dtype."""
    if arr.dtype.kind != "u" or arr.dtype.itemsize * 8 not in bits:
        allowed = " or ".join(f"uint{b}" for b in bits)
        raise TypeError(f"{what} takes {allowed} images; {name} is {arr.dtype}")
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
