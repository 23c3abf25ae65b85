"""Graph-based segmentation, scikit-image's ``skimage.segmentation`` names and defaults."""

import numpy as np

from . import _core, _device

__all__ = ["felzenszwalb"]


def felzenszwalb(image, scale=1, sigma=0.8, min_size=20, *, channel_axis=-1, device="auto"):
    """Felzenszwalb–Huttenlocher segmentation: labels ``0..n-1`` (int64), numbered in raster
    order of each segment's first pixel. scikit-image: ``skimage.segmentation.felzenszwalb``
    (the same labels on the CPU; they can differ only where two graph edges have exactly the
    same non-zero weight, which scikit-image orders with an unstable sort).

    Images: uint8, grey (2D) or RGB (3 channels along ``channel_axis``). On CUDA the result is
    the exact round-based version (identical but for such ties).

    CUDA arrays (CuPy, PyTorch, ``__cuda_array_interface__``, DLPack) are segmented on the
    device with no host copy (a few kB of round counters are read back) and the labels come
    back as an int64 array of the input's library.
    """
    dev = _device.from_object(image)
    arr = np.asarray(image) if dev is None else dev
    # The checks first (without moving data), then the layout: a CUDA array is rearranged on
    # the device by its own library.
    if channel_axis is None:
        if arr.ndim > 2:
            raise ValueError("This algorithm works only on single or multi-channel 2d images. ")
    elif arr.ndim not in (2, 3):
        raise ValueError(
            f"felzenszwalb takes 2D grey or colour images; image has shape {arr.shape}"
        )
    if arr.dtype != np.uint8:
        raise TypeError(f"felzenszwalb takes uint8 images; image is {arr.dtype}")
    if isinstance(min_size, bool) or not isinstance(min_size, (int, np.integer)) or min_size < 0:
        raise ValueError(f"min_size must be an integer >= 0, got {min_size!r}")

    def run(a, d):
        return _core.felzenszwalb(a, float(scale), float(sigma), int(min_size), d)

    if dev is not None:
        _device.require_cuda(device)
        if arr.ndim == 2:
            arr = arr.expand_last()
        elif channel_axis not in (-1, 2):
            arr = arr.moveaxis(channel_axis, -1)
        return arr.call(run, device)
    if arr.ndim == 2:
        arr = arr[..., np.newaxis]
    elif channel_axis is not None:
        arr = np.moveaxis(arr, channel_axis, -1)
    return run(np.ascontiguousarray(arr), device)
