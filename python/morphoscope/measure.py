"""Labels and region properties, scikit-image's ``skimage.measure`` names and defaults.

``label`` equals scikit-image's on binary images (one foreground value besides the background):
same numbering (raster order of each component's first pixel), dtype (int32 for bool input,
int64 otherwise) and default connectivity (8 neighbours). ``regionprops_table`` computes the
properties of morphoscope's feature pass from exact integer sums.

CUDA arrays (CuPy, PyTorch, ``__cuda_array_interface__``, DLPack): ``label`` computes on the
device with no host copy (only the component count is read back) and returns an array of the
input's library; ``regionprops_table`` is computed on the host (see its docs).
"""

import numpy as np

from . import _args, _core, _device

__all__ = ["label", "regionprops_table"]


def label(label_image, background=None, return_num=False, connectivity=None, *, device="auto"):
    """Labels the connected components of the pixels that differ from ``background`` (default
    0): 0 for the background, ``1..n`` in raster order of each component's first pixel.
    scikit-image: ``skimage.measure.label`` (same result and dtype).

    ``connectivity`` 1: 4 neighbours, 2 or ``None``: 8. The image must be binary (one value
    besides the background); scikit-image also splits touching regions of different values,
    which morphoscope does not compute (``ValueError``). With ``return_num``, returns
    ``(labels, n)``.
    """
    arr = _args.image_2d(label_image, "label", "label_image")
    if connectivity is not None and not 1 <= connectivity <= 2:
        raise ValueError(
            f"Connectivity for 2D image should be in [1, ..., 2]. Got {connectivity}."
        )
    conn = _args.neighbours(connectivity, 2)
    bg = 0 if background is None else background
    int32 = arr.dtype == bool
    if isinstance(arr, _device.CudaArray):
        _device.require_cuda(device)
        dev = arr.native()
        mask = dev.array != bg
        _check_binary(dev.array[mask], lambda v: v.item())

        def run(m, d):
            # An empty mask comes as a NumPy bool array (_device.CudaArray.call).
            m = m.view(np.uint8) if isinstance(m, np.ndarray) else m
            return _core.label(m, conn, d, int32)

        labels, num = dev.with_array(mask).call(run, device)
        return (labels, num) if return_num else labels
    if arr.dtype == bool and bg in (0, 1):
        # A boolean image is binary: its mask is itself (or its complement), no check needed.
        mask = ~arr if bg else arr
    else:
        mask = arr != bg
        _check_binary(arr[mask], repr)
    labels, num = _core.label(np.ascontiguousarray(mask).view(np.uint8), conn, device, int32)
    return (labels, num) if return_num else labels


def _check_binary(values, show):
    """``ValueError`` when the foreground ``values`` hold more than one value (``show`` writes
    one for the message)."""
    if values.shape[0] and bool((values != values[0]).any()):
        raise ValueError(
            "morphoscope labels binary images (one value besides the background); label_image "
            "has several (e.g. "
            f"{show(values[0])} and {show(values[values != values[0]][0])}): label the mask of "
            "each value separately"
        )


# scikit-image property → columns of _core.region_sums, in scikit-image's key order.
_COLUMNS = {
    "label": ["label"],
    "area": ["area"],
    "bbox": ["min_row", "min_col", "max_row", "max_col"],
    "centroid": ["centroid_row", "centroid_col"],
    "intensity_mean": ["intensity_mean"],
}
_SUPPORTED = ("label", "area", "bbox", "centroid", "inertia_tensor", "intensity_mean")


def regionprops_table(
    label_image, intensity_image=None, properties=("label", "bbox"), *, separator="-",
    device="auto",
):
    """Properties of the regions of an integer label image (every positive value is one
    region; 0 and negative values are background) as a dict of 1D NumPy arrays, one entry per
    region in label order. scikit-image: ``skimage.measure.regionprops_table`` (same keys,
    dtypes and values).

    ``properties``: any of ``label``, ``area``, ``bbox``, ``centroid``, ``inertia_tensor`` (the
    second-order central moments, scikit-image's ``[[mu_cc, -mu_rc], [-mu_rc, mu_rr]] / area``
    where ``mu_cc`` sums the squared column offsets), ``intensity_mean`` (uint8 or uint16
    ``intensity_image``).
    label, area, bbox, centroid and intensity_mean are bit-identical to scikit-image;
    inertia_tensor agrees to rounding (exact integer sums here, floating-point sums there).
    Computed on the CPU whatever ``device`` (which is still checked): the library has no device
    version of these per-label sums (its GPU features are per connected component of a mask).
    So CUDA arrays (``label_image`` and ``intensity_image`` both, or ``intensity_image`` None)
    are read to the host, and the columns come back as arrays of their library on the device
    (one element per region).
    """
    if device not in ("auto", "cuda", "cpu"):
        raise ValueError(f'device={device!r}: one of "auto", "cuda", "cpu"')
    arr = _args.image_2d(label_image, "regionprops_table", "label_image")
    on_device = isinstance(arr, _device.CudaArray)
    if device == "cuda" and not on_device and not _core.cuda_available():
        raise RuntimeError('device="cuda": CUDA is unavailable; use device="cpu" or "auto"')
    if arr.dtype == bool:
        raise TypeError(
            "Non-integer image types are ambiguous: use morphoscope.measure.label to label the "
            "connected components of label_image, or label_image.astype(np.uint8) to interpret "
            "the True values as a single label."
        )
    if arr.dtype.kind not in "iu":
        raise TypeError("Non-integer label_image types are ambiguous")
    if isinstance(properties, str):
        properties = (properties,)
    for p in properties:
        if p not in _SUPPORTED:
            raise ValueError(
                f"property {p!r} is not computed by morphoscope (one of: {', '.join(_SUPPORTED)})"
            )
    if "intensity_mean" in properties and intensity_image is None:
        raise AttributeError(
            "Attribute 'intensity_mean' unavailable when `intensity_image` has not been "
            "specified."
        )
    intensity = None
    if intensity_image is not None:
        iarr = _args.image_2d(intensity_image, "regionprops_table", "intensity_image")
        if isinstance(iarr, _device.CudaArray) != on_device:
            raise TypeError(
                "label_image and intensity_image must both be NumPy arrays or both CUDA arrays"
            )
        if iarr.shape != arr.shape:
            raise ValueError(
                f"intensity_image has shape {iarr.shape}, label_image {arr.shape}: they must match"
            )
        intensity = _args.unsigned(iarr, "regionprops_table", "intensity_image")
    if on_device:
        _device.require_cuda(device)
        arr_host = arr.to_host()
        if intensity is not None:
            intensity = np.ascontiguousarray(intensity.to_host())
        out = _table(_label_array(arr_host), intensity, properties, separator)
        return {k: arr.from_host(v) for k, v in out.items()}
    return _table(_label_array(arr), intensity, properties, separator)


# Label dtypes the extension reads as they are; any other integer type is converted to int64.
_LABEL_DTYPES = tuple(np.dtype(t) for t in ("int64", "int32", "uint32", "uint16", "uint8"))


def _label_array(arr):
    """A C-contiguous native-order label array the extension reads without conversion."""
    if arr.dtype.newbyteorder("=") in _LABEL_DTYPES:
        return np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("="))
    return np.ascontiguousarray(arr, dtype=np.int64)


def _table(labels, intensity, properties, separator):
    """The columns of ``properties`` from the sums of a label image (host arrays)."""
    sums = _core.region_sums(labels, intensity)
    out = {}
    for p in properties:
        if p == "inertia_tensor":
            area = sums["area"]
            with np.errstate(invalid="ignore", divide="ignore"):
                t00 = sums["mu20"] / area
                t01 = -sums["mu11"] / area
                t11 = sums["mu02"] / area
            out[f"inertia_tensor{separator}0{separator}0"] = t00
            out[f"inertia_tensor{separator}0{separator}1"] = t01
            out[f"inertia_tensor{separator}1{separator}0"] = t01.copy()
            out[f"inertia_tensor{separator}1{separator}1"] = t11
            continue
        cols = _COLUMNS[p]
        if len(cols) == 1:
            out[p] = sums[cols[0]]
        else:
            for i, c in enumerate(cols):
                out[f"{p}{separator}{i}"] = sums[c]
    return out
